"""The UI's run pages: Run evaluation (form, live progress, result), Run history (drawer, compare two)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError

from ragpulse.errors import NotFoundError
from ragpulse.services import run_queue, runs_view, testsets
from ragpulse.services.errors import Conflict, ServiceError
from ragpulse.services.runs import compare_runs

if TYPE_CHECKING:
    from ragpulse.web.views import Ui

__all__ = ["build_runs_router"]


def _request_from_form(form: Any) -> dict[str, Any]:
    """The :class:`~ragpulse.services.run_queue.RunRequest` fields of the Run evaluation form."""
    body: dict[str, Any] = {"test_set": str(form.get("test_set", ""))}
    run_id = str(form.get("run_id", "")).strip()
    if run_id:
        body["run_id"] = run_id
    judges = [str(j) for j in form.getlist("judges")]
    if judges:
        body["judges"] = judges
    thresholds: dict[str, float] = {}
    for key, value in form.multi_items():
        if key.startswith("threshold_") and str(value).strip():
            try:
                thresholds[key.removeprefix("threshold_")] = float(str(value))
            except ValueError:
                thresholds[
                    key.removeprefix("threshold_")
                ] = -1.0  # rejected by the checks with the judge named
    if thresholds:
        body["thresholds"] = thresholds
    if str(form.get("judge_model", "")).strip():
        body["judge_model"] = str(form["judge_model"])
    endpoint = str(form.get("rag_endpoint", "")).strip()
    if endpoint:
        rag: dict[str, Any] = {"endpoint": endpoint}
        if str(form.get("top_k", "")).strip():
            rag["top_k"] = int(str(form["top_k"]))
        if str(form.get("similarity_threshold", "")).strip():
            rag["similarity_threshold"] = float(str(form["similarity_threshold"]))
        body["rag"] = rag
    fail_under = [line.strip() for line in str(form.get("fail_under", "")).splitlines() if line.strip()]
    if fail_under:
        body["fail_under"] = fail_under
    return body


def build_runs_router(ui: Ui) -> APIRouter:
    """The run pages' routes."""
    r = APIRouter(include_in_schema=False)
    ctx = ui.ctx
    store = ctx.store

    async def new_run_page(request: Request, **extra: Any) -> HTMLResponse:
        sets = (await testsets.list_test_sets(store, limit=500)).items
        judges = [
            {"name": n, "threshold": getattr(j, "threshold", None)} for n, j in sorted(ctx.judges.items())
        ]
        return ui.render(
            request,
            "run_new.html",
            section="run",
            sets=sets,
            judges=judges,
            options=run_queue.run_options(ctx.settings),
            chosen=request.query_params.get("test_set"),
            **extra,
        )

    @r.get("/runs/new")
    async def run_form(request: Request) -> HTMLResponse:
        ui.guard(request)
        return await new_run_page(request)

    @r.post("/runs")
    async def start_run(request: Request) -> Response:
        form = await ui.form(request)
        try:
            body = _request_from_form(form)
            req = run_queue.RunRequest.model_validate(body)
            accepted = await run_queue.enqueue_run(store, ctx.settings, sorted(ctx.judges), req)
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            return await new_run_page(request, err=f"{where}: {first['msg']}")
        except (ServiceError, NotFoundError, ValueError) as e:
            return await new_run_page(request, err=str(e))
        if ctx.runs is not None:
            ctx.runs.wake()
        return RedirectResponse(f"/runs/{quote(accepted.run_id)}", status_code=303)

    @r.get("/runs")
    async def history(request: Request, cursor: str | None = None) -> HTMLResponse:
        ui.guard(request)
        page = await runs_view.list_runs(store, cursor=cursor)
        return ui.render(
            request, "runs.html", section="history", runs=page.items, next_cursor=page.next_cursor
        )

    @r.get("/runs/compare")
    async def compare(request: Request) -> Response:
        ui.guard(request)
        picked = request.query_params.getlist("run")
        if len(picked) == 2:  # two ticked runs compare older (A) → newer (B), whatever the list order
            found = [run for rid in picked if (run := await store.get_run(rid)) is not None]
            if len(found) == 2:
                picked = [run.run_id for run in sorted(found, key=lambda run: run.started_at)]
        a = request.query_params.get("a") or (picked[0] if len(picked) == 2 else None)
        b = request.query_params.get("b") or (picked[1] if len(picked) == 2 else None)
        if not a or not b:
            return RedirectResponse("/runs?err=compare_help", status_code=303)
        cmp = await compare_runs(store, a, b)
        return ui.render(request, "compare.html", section="history", cmp=cmp.to_json())

    @r.get("/runs/{run_id}")
    async def run_page(request: Request, run_id: str, failing_cursor: str | None = None) -> HTMLResponse:
        ui.guard(request)
        run = await runs_view.get_run(store, run_id)
        if failing_cursor is not None:  # a later page of the failing cases ("Next page")
            page = await runs_view.case_page(store, run_id, failing=True, cursor=failing_cursor)
            run = run.model_copy(
                update={"failing_cases": page.items, "failing_next_cursor": page.next_cursor}
            )
        return ui.render(
            request,
            "run.html",
            section="history",
            run=run.model_dump(),
            failing_page=failing_cursor is not None,
        )

    @r.get("/runs/{run_id}/live")
    async def run_live(request: Request, run_id: str) -> HTMLResponse:
        ui.guard(request)
        run = await runs_view.get_run(store, run_id)
        return ui.render(request, "run_live.html", run=run.model_dump())

    @r.get("/runs/{run_id}/drawer")
    async def run_drawer(request: Request, run_id: str) -> HTMLResponse:
        ui.guard(request)
        run = await runs_view.get_run(store, run_id)
        return ui.render(request, "run_drawer.html", run=run.model_dump())

    @r.post("/runs/{run_id}/cancel")
    async def cancel(request: Request, run_id: str) -> Response:
        await ui.form(request)
        try:
            await run_queue.cancel_run(store, run_id)
        except Conflict as e:  # the run has finished: its page, with why
            run = await runs_view.get_run(store, run_id)
            return ui.render(request, "run.html", 409, section="history", run=run.model_dump(), err=str(e))
        return RedirectResponse(f"/runs/{quote(run_id)}", status_code=303)

    return r
