"""The UI's run pages: Run evaluation (form, live progress, result), Run history (drawer, compare two)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError

from ragpulse.errors import BadRequest, Conflict, NotFoundError, ServiceError
from ragpulse.portal import run_history
from ragpulse.portal.problems import validation_message
from ragpulse.portal.ui.pages import Ui, UiDep
from ragpulse.runs import queue as run_queue
from ragpulse.runs import testsets
from ragpulse.runs.compare import DEFAULT_SCORE_DROP
from ragpulse.runs.stored import compare_runs

__all__ = ["router"]


def _request_from_form(form: Any) -> dict[str, Any]:
    """The :class:`~ragpulse.runs.queue.RunRequest` fields of the Run evaluation form."""
    body: dict[str, Any] = {"test_set": str(form.get("test_set", ""))}
    run_id = str(form.get("run_id", "")).strip()
    if run_id:
        body["run_id"] = run_id
    judges = [str(j) for j in form.getlist("judges")]
    if judges or form.get("judges_shown"):  # the form lists the judges: none ticked is a choice (refused)
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


router = APIRouter(include_in_schema=False)


def _threshold(ui: Ui, name: str) -> float | None:
    built = ui.ctx.judges.get(name)
    if built is not None:
        value = getattr(built, "threshold", None)
    else:
        value = ui.ctx.settings.judge.options.get(name, {}).get("threshold")
    return float(value) if isinstance(value, int | float) else None


async def new_run_page(ui: Ui, request: Request, **extra: Any) -> HTMLResponse:
    sets = (await testsets.list_test_sets(ui.ctx.store, limit=500)).items
    # every judge the CLI accepts; the ones serve runs by default are ticked
    judges = [
        {"name": n, "threshold": _threshold(ui, n), "default": n in ui.ctx.judges}
        for n in run_queue.choosable_judges(ui.ctx.settings, ui.ctx.judges)
    ]
    return ui.render(
        request,
        "run_new.html",
        section="run",
        sets=sets,
        judges=judges,
        options=run_queue.run_options(ui.ctx.settings),
        chosen=request.query_params.get("test_set"),
        **extra,
    )


@router.get("/runs/new")
async def run_form(ui: UiDep, request: Request) -> HTMLResponse:
    ui.guard(request)
    return await new_run_page(ui, request)


@router.post("/runs")
async def start_run(ui: UiDep, request: Request) -> Response:
    form = await ui.form(request)
    again = f"/runs/new?{urlencode({'test_set': str(form.get('test_set', ''))})}"
    try:
        body = _request_from_form(form)
        req = run_queue.RunRequest.model_validate(body)
        known = run_queue.choosable_judges(ui.ctx.settings, ui.ctx.judges)
        accepted = await run_queue.enqueue_run(ui.ctx.store, ui.ctx.settings, known, req)
    except ValidationError as e:  # the form again, with what was chosen (POST-redirect-GET)
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return ui.back(request, again, err=f"{where}: {validation_message(first)}", form=form)
    except (ServiceError, NotFoundError, ValueError) as e:
        return ui.back(request, again, err=str(e), form=form)
    if ui.ctx.runs is not None:
        ui.ctx.runs.wake()
    return RedirectResponse(f"/runs/{quote(accepted.run_id, safe='')}", status_code=303)


@router.get("/runs")
async def history(
    ui: UiDep,
    request: Request,
    cursor: str | None = None,
    status: str | None = None,
    test_set: str | None = None,
) -> HTMLResponse:
    """Run history, newest first, optionally of one ``test_set`` and/or ``status`` (an unknown status is the
    error page, 400, as the API refuses it)."""
    ui.guard(request)
    page = await run_history.list_runs(
        ui.ctx.store, test_set=test_set or None, status=status or None, cursor=cursor
    )
    return ui.render(
        request,
        "runs.html",
        section="history",
        runs=page.items,
        next_cursor=page.next_cursor,
        run_status=status,
        test_set=test_set,
    )


@router.get("/runs/compare")
async def compare(ui: UiDep, request: Request) -> Response:
    ui.guard(request)
    picked = request.query_params.getlist("run")
    if len(picked) == 2:  # two ticked runs compare older (A) → newer (B), whatever the list order
        found = [run for rid in picked if (run := await ui.ctx.store.get_run(rid)) is not None]
        if len(found) == 2:
            picked = [run.run_id for run in sorted(found, key=lambda run: run.started_at)]
    a = request.query_params.get("a") or (picked[0] if len(picked) == 2 else None)
    b = request.query_params.get("b") or (picked[1] if len(picked) == 2 else None)
    if not a or not b:
        return RedirectResponse("/runs?err=compare_help", status_code=303)
    drop = request.query_params.get("score_drop") or str(DEFAULT_SCORE_DROP)
    try:
        score_drop = float(drop)
    except ValueError:
        raise BadRequest(f"score drop must be a number, not {drop[:40]!r}") from None
    cmp = await compare_runs(ui.ctx.store, a, b, score_drop=score_drop)
    return ui.render(request, "compare.html", section="history", cmp=cmp.to_json())


@router.get("/runs/{run_id}")
async def run_page(
    ui: UiDep, request: Request, run_id: str, failing_cursor: str | None = None
) -> HTMLResponse:
    ui.guard(request)
    run = await run_history.get_run(ui.ctx.store, run_id)
    if failing_cursor is not None:  # a later page of the failing cases ("Next page")
        page = await run_history.case_page(ui.ctx.store, run_id, failing=True, cursor=failing_cursor)
        run = run.model_copy(update={"failing_cases": page.items, "failing_next_cursor": page.next_cursor})
    return ui.render(
        request,
        "run.html",
        section="history",
        run=run.model_dump(),
        failing_page=failing_cursor is not None,
    )


@router.get("/runs/{run_id}/live")
async def run_live(ui: UiDep, request: Request, run_id: str) -> HTMLResponse:
    ui.guard(request)
    run = await run_history.get_run(ui.ctx.store, run_id)
    return ui.render(request, "run_live.html", run=run.model_dump())


@router.get("/runs/{run_id}/drawer")
async def run_drawer(ui: UiDep, request: Request, run_id: str) -> HTMLResponse:
    ui.guard(request)
    run = await run_history.get_run(ui.ctx.store, run_id)
    return ui.render(request, "run_drawer.html", run=run.model_dump())


@router.post("/runs/{run_id}/cancel")
async def cancel(ui: UiDep, request: Request, run_id: str) -> Response:
    await ui.form(request)
    page = f"/runs/{quote(run_id, safe='')}"
    try:
        status = await run_queue.cancel_run(ui.ctx.store, run_id)
    except Conflict as e:  # the run has finished: its page, with why
        return ui.back(request, page, err=str(e))
    return ui.back(request, page, msg="cancelled_msg" if status == "cancelled" else "cancel_requested")
