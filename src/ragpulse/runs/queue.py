"""Runs started from the portal: a queue in PostgreSQL and the worker that runs them inside ``ragpulse serve``.

``POST /api/v1/runs`` (and the UI's Run evaluation) call :func:`enqueue_run`: the request is checked (the test
set exists, judges, judge model and RAG endpoint name configured ones, thresholds parse) and stored with the run
in status ``queued``. :class:`RunWorker` (started by ``serve`` with the portal) claims queued runs with
``FOR UPDATE SKIP LOCKED`` — replicas never take the same run — and replays each through the same engine and
report code as ``ragpulse replay`` (:func:`ragpulse.runs.replay.run_replay`), reporting progress (cases done
/ total) as it goes. A run whose worker stopped reporting for :data:`STALE_AFTER` (a replica that died) is
queued again — at once when it ran in a process of this host that is gone (``serve`` killed and
restarted) — and replayed from the start under the same run id (its traces' ids are the same, so the store
keeps one judgement per case and judge).

Cancel (:func:`cancel_run`): a queued run is cancelled at once; a running one is flagged, its worker notices
within :data:`POLL_S` and closes the gate in front of the run's judges — from then on no judge is called for
it (the cases left are recorded ``skipped``/``cancelled``) — and the run is stored as ``cancelled`` with the
report of what was judged.

The request names things; it never carries a URL or a secret: ``judge_model`` names an entry of the
``judge.models`` setting and ``rag.endpoint`` one of ``rag.endpoints`` (URL, field names and the environment
variable of its key are configuration).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ragpulse.aio import cancel_and_wait
from ragpulse.config import JudgeModel, RagEndpoint, Settings
from ragpulse.errors import BadRequest, Conflict, NotFoundError
from ragpulse.judges.selection import check_judges_named, known_judge_names, run_judges
from ragpulse.logging import get_logger
from ragpulse.model import Judgement, JudgementStatus, RunRecord, RunStatus, Trace
from ragpulse.protocols import Judge
from ragpulse.runs.endpoints import run_settings
from ragpulse.runs.testsets import RunId, TestSetName, load_test_set
from ragpulse.store import PostgresStore

__all__ = [
    "POLL_S",
    "STALE_AFTER",
    "RagChoice",
    "RunAccepted",
    "RunRequest",
    "RunWorker",
    "cancel_run",
    "enqueue_run",
    "run_options",
]

log = get_logger("ragpulse.runs.queue")

#: How often a worker looks for queued runs and, while running one, reports progress and reads cancel flags.
POLL_S = 0.25
#: A running portal run whose worker has not reported for this long is queued again.
STALE_AFTER = timedelta(seconds=60)
#: Idle polls between two looks for orphaned runs (about every 20 s).
ORPHAN_CHECK_EVERY = 20


def _alive(pid: int) -> bool:
    """True when process ``pid`` exists on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class RagChoice(BaseModel):
    """Which configured RAG endpoint answers cases without a recorded answer, with its retrieval parameters."""

    model_config = ConfigDict(extra="forbid")
    endpoint: str = Field(min_length=1, max_length=128, description="a name of the rag.endpoints setting")
    top_k: int | None = Field(default=None, ge=1, le=1000)
    similarity_threshold: float | None = Field(default=None, ge=0, le=1)


class RunRequest(BaseModel):
    """A run to start (``POST /api/v1/runs``): names only, never a URL or a key."""

    model_config = ConfigDict(extra="forbid")
    test_set: TestSetName
    run_id: RunId | None = None
    judges: list[str] | None = Field(
        default=None,
        description="judge names; absent: the default judges of a replay; [] is refused (no judges to run)",
    )
    thresholds: dict[str, float] | None = Field(default=None, description="judge → threshold 0–1")
    judge_model: str | None = Field(default=None, max_length=128, description="a name of judge.models")
    rag: RagChoice | None = None
    fail_under: list[str] | None = Field(
        default=None, description='e.g. ["pass_rate=0.8", "faithfulness=0.7"]'
    )


class RunAccepted(BaseModel):
    """The answer to a started run."""

    run_id: str
    status: str
    status_url: str


def _models(settings: Settings) -> Mapping[str, JudgeModel]:
    return settings.judge.models


def _endpoints(settings: Settings) -> Mapping[str, RagEndpoint]:
    return settings.rag.endpoints


def run_options(settings: Settings) -> dict[str, list[str]]:
    """The names a run may choose: ``judge_models`` and ``rag_endpoints`` (configured), sorted."""
    return {"judge_models": sorted(_models(settings)), "rag_endpoints": sorted(_endpoints(settings))}


def choosable_judges(settings: Settings, built: Iterable[str] = ()) -> list[str]:
    """Every judge a run may choose, sorted: what ``ragpulse replay --judges`` accepts (registered judges —
    retrieval judges too — and configured checklists, :func:`~ragpulse.judges.selection.known_judge_names`)
    plus ``built`` (the judges ``serve`` built)."""
    return sorted(known_judge_names(settings) | set(built))


def _check(req: RunRequest, settings: Settings, known_judges: Sequence[str]) -> None:
    from ragpulse.runs.gate import parse_thresholds

    known = set(known_judges)
    unknown = sorted(set(req.judges or ()) - known)
    if unknown:
        raise BadRequest(f"unknown judge(s) {', '.join(unknown)}; configured: {', '.join(sorted(known))}")
    for name, value in (req.thresholds or {}).items():
        if name not in known:
            raise BadRequest(f"threshold for unknown judge {name!r}")
        if not 0.0 <= value <= 1.0:
            raise BadRequest(f"threshold of {name} must be in [0, 1], got {value}")
    if req.judge_model is not None and req.judge_model not in _models(settings):
        raise BadRequest(
            f"unknown judge model {req.judge_model!r}; configured (judge.models): "
            f"{', '.join(sorted(_models(settings))) or 'none'}"
        )
    if req.rag is not None and req.rag.endpoint not in _endpoints(settings):
        raise BadRequest(
            f"unknown RAG endpoint {req.rag.endpoint!r}; configured (rag.endpoints): "
            f"{', '.join(sorted(_endpoints(settings))) or 'none'}"
        )
    if req.fail_under:
        try:
            parse_thresholds(req.fail_under, judges=known)
        except Exception as e:  # ConfigError with the offending item
            raise BadRequest(f"fail_under: {e}") from e


async def enqueue_run(
    store: PostgresStore, settings: Settings, known_judges: Sequence[str], req: RunRequest
) -> RunAccepted:
    """Check ``req`` and queue the run (status ``queued``, progress 0 / cases).

    Raises:
        NotFoundError: the test set does not exist.
        BadRequest: an unknown judge, judge model or RAG endpoint, a bad threshold or ``fail_under`` item; a
            test set without cases or a run without judges (:func:`~ragpulse.judges.selection.run_judges`).
        Conflict: ``run_id`` exists already.
    """
    from ragpulse.runs.runner import new_run_id

    ts = await load_test_set(store, req.test_set)
    check_judges_named(req.judges)
    _check(req, settings, known_judges)
    run_judges(settings, ts, req.judges)
    run_id = req.run_id or new_run_id(ts.name)
    record = RunRecord(
        run_id=run_id, test_set=ts.name, status=RunStatus.QUEUED, settings={"request": req.model_dump()}
    )
    if not await store.enqueue_run(record, req.model_dump(mode="json"), len(ts.cases)):
        raise Conflict(f"run {run_id!r} exists already")
    log.info("run_queued", run_id=run_id, test_set=ts.name, cases=len(ts.cases))
    return RunAccepted(run_id=run_id, status="queued", status_url=f"/api/v1/runs/{run_id}")


async def cancel_run(store: PostgresStore, run_id: str) -> str:
    """Cancel a queued or running run; returns its status afterwards (``cancelled`` or, for a running run
    whose worker has not stopped it yet, ``running``).

    Raises:
        NotFoundError: no such run.
        Conflict: the run has finished.
    """
    before = await store.request_cancel(run_id)
    if before is None:
        raise NotFoundError(f"run {run_id[:100]!r} not found")
    if before not in ("queued", "running"):
        raise Conflict(
            f"run {run_id!r} has finished ({before}); only a queued or running run can be cancelled"
        )
    return "cancelled" if before == "queued" else "running"


class _Gate:
    """Open until the run is cancelled."""

    def __init__(self) -> None:
        self.closed = False


class _GatedJudge:
    """A judge that stops calling its inner judge once the run's gate closes (then: ``skipped``/``cancelled``)."""

    def __init__(self, inner: Judge, gate: _Gate) -> None:
        self.inner = inner
        self.gate = gate
        self.name = inner.name
        self.version = inner.version
        self.backend = inner.backend
        self.threshold = inner.threshold
        self.needs_answer = getattr(inner, "needs_answer", True)
        self.model = getattr(inner, "model", None)

    async def judge(self, trace: Trace) -> Judgement:
        if self.gate.closed:
            return Judgement(
                judge=self.name,
                version=self.version,
                backend=self.backend,
                threshold=self.threshold,
                status=JudgementStatus.SKIPPED,
                reason="cancelled: the run was cancelled",
            )
        return await self.inner.judge(trace)


def _run_settings(settings: Settings, req: RunRequest) -> Settings:
    """``settings`` with the request's thresholds, judge model and RAG endpoint applied to their sections (a
    key goes only to the host it was configured for: :func:`ragpulse.runs.endpoints.run_settings`)."""
    return run_settings(
        settings,
        judge_model=req.judge_model,
        rag_endpoint=req.rag.endpoint if req.rag is not None else None,
        thresholds=req.thresholds,
    )


def _rag_extra(settings: Settings, choice: RagChoice) -> dict[str, Any]:
    """The retrieval parameters of ``choice`` under the request field names its endpoint configures."""
    endpoint = _endpoints(settings)[choice.endpoint]
    extra: dict[str, Any] = {}
    top_k_field = getattr(endpoint, "top_k_field", None)
    threshold_field = getattr(endpoint, "threshold_field", None)
    if choice.top_k is not None and top_k_field:
        extra[top_k_field] = choice.top_k
    if choice.similarity_threshold is not None and threshold_field:
        extra[threshold_field] = choice.similarity_threshold
    return extra


class _RunStore(PostgresStore):
    """The store as one portal run sees it (same connection pool): finishing the run after its gate closed
    stores it as ``cancelled``, with the report of what was judged until then."""

    def __init__(self, store: PostgresStore, gate: _Gate) -> None:
        super().__init__(store.pool, redact_text=store.redact_text, acquire_timeout_s=store.acquire_timeout_s)
        self._gate = gate

    async def finish_run(self, run_id: str, status: RunStatus, report: dict[str, Any]) -> None:
        if self._gate.closed and status is not RunStatus.FAILED:
            status = RunStatus.CANCELLED
            report = {**report, "status": status.value}
        await super().finish_run(run_id, status, report)

    async def close(self) -> None:
        """The pool belongs to the store this one was made from: nothing to close."""


class RunWorker:
    """Runs queued portal runs one at a time inside ``serve``; an async context manager.

    Args:
        store: the result store (its run queue).
        settings: the process settings (each run applies its request on top).
    """

    def __init__(self, store: PostgresStore, settings: Settings) -> None:
        self.store = store
        self.settings = settings
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}"
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    async def requeue_orphans(self) -> list[str]:
        """Queue again the running portal runs whose worker is gone: a process of this host that no longer
        exists (a ``serve`` that was killed and restarted), or any worker silent for :data:`STALE_AFTER`."""
        host = socket.gethostname()
        now = datetime.now(UTC)
        orphans = []
        for r in await self.store.running_portal_runs():
            owner_host, _, pid = str(r["claimed_by"] or "").rpartition(":")
            dead = owner_host == host and pid.isdigit() and not _alive(int(pid))
            silent = r["heartbeat_at"] is None or now - r["heartbeat_at"] > STALE_AFTER
            if dead or silent:
                orphans.append(r["run_id"])
        requeued = await self.store.requeue_runs(orphans) if orphans else []
        if requeued:
            log.info("runs_requeued", runs=requeued)
        return requeued

    async def __aenter__(self) -> RunWorker:
        await self.requeue_orphans()
        self._task = asyncio.create_task(self._loop(), name="ragpulse-run-worker")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)

    def wake(self) -> None:
        """A run was queued here: look now instead of at the next poll."""
        self._wake.set()

    async def _loop(self) -> None:
        idle = 0
        while True:
            try:
                if idle % ORPHAN_CHECK_EVERY == ORPHAN_CHECK_EVERY - 1:
                    await self.requeue_orphans()
                row = await self.store.claim_queued_run(self.worker_id)
            except Exception as e:
                log.warning("run_queue_unavailable", error=str(e))
                row = None
            if row is None:
                idle += 1
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), POLL_S * 4)
                continue
            try:
                await self._execute(row)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.error("run_failed", run_id=row["run_id"], error=f"{type(e).__name__}: {e}")
                with contextlib.suppress(Exception):
                    await self.store.set_run_status(
                        row["run_id"],
                        "failed",
                        {
                            "run_id": row["run_id"],
                            "test_set": row["test_set"],
                            "status": "failed",
                            "error": str(e)[:500],
                        },
                    )

    async def _execute(self, row: Mapping[str, Any]) -> None:
        from ragpulse.judges.selection import open_judges
        from ragpulse.runs.rag_client import RagClient
        from ragpulse.runs.replay import run_replay

        run_id = str(row["run_id"])
        req = RunRequest.model_validate(row["request"] or {"test_set": row["test_set"]})
        ts = await load_test_set(self.store, req.test_set)
        settings = _run_settings(self.settings, req)
        gate = _Gate()
        state = {"done": 0, "total": len(ts.cases)}

        def progress(done: int, total: int) -> None:
            state["done"], state["total"] = done, total

        async def watch(task: asyncio.Task[Any]) -> None:
            reported = -1
            while not task.done():
                cancel = await self.store.run_progress(run_id, state["done"], state["total"])
                reported = state["done"]
                if cancel and not gate.closed:
                    # no judge is called from now on; the cases left go by as skipped and the run is stored
                    # as cancelled with the report of what was judged
                    gate.closed = True
                    log.info("run_cancelling", run_id=run_id, done=state["done"])
                await asyncio.sleep(POLL_S)
            if reported != state["done"]:
                await self.store.run_progress(run_id, state["done"], state["total"])

        log.info("run_started", run_id=run_id, test_set=ts.name, cases=len(ts.cases))
        async with AsyncExitStack() as stack:
            selection = run_judges(settings, ts, req.judges)  # the cases may have gone since the request
            judges = await open_judges(stack, settings, selection.names, ledger=self.store)
            gated: dict[str, Judge] = {n: _GatedJudge(j, gate) for n, j in judges.items()}
            rag = None
            if req.rag is not None:
                rag = await stack.enter_async_context(
                    RagClient(settings, extra=_rag_extra(self.settings, req.rag))
                )
            task = asyncio.create_task(
                run_replay(
                    ts,
                    judges=gated,
                    store=_RunStore(self.store, gate),
                    settings=settings,
                    run_id=run_id,
                    rag_client=rag,
                    progress=progress,
                    judges_added=selection.added,
                )
            )
            watcher = asyncio.create_task(watch(task))
            try:
                await task
            finally:
                await cancel_and_wait(watcher, swallow_errors=True)
        await self.store.run_progress(run_id, state["done"], state["total"])
        log.info("run_cancelled" if gate.closed else "run_done", run_id=run_id, done=state["done"])
