"""The web UI's pages: thin adapters over :mod:`ragpulse.services`, rendered with Jinja2 (autoescaped).

Every page is usable without JavaScript except the live parts (run progress, "load more", the drawer), which use
the vendored htmx. Writes are POST forms with a CSRF token, answered with a redirect (303) to the page to show.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import jinja2
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from markupsafe import Markup, escape
from starlette.datastructures import UploadFile

from ragpulse.api.auth import (
    CSRF_COOKIE,
    SESSION_COOKIE,
    check_csrf,
    new_csrf_token,
    session_ok,
    session_value,
    token_matches,
)
from ragpulse.api.context import PortalContext
from ragpulse.errors import NotFoundError
from ragpulse.services import stats, testsets, traces
from ragpulse.services.errors import ServiceError
from ragpulse.services.timewindow import window
from ragpulse.web.charts import histogram_svg, timeseries_svg
from ragpulse.web.i18n import LANG_COOKIE, notice, pick_language, reason_html, translator

__all__ = ["LoginRequired", "Ui", "highlight_answer"]

_HERE = Path(__file__).parent
_WINDOWS = {"1h", "24h", "7d", "30d"}


class LoginRequired(Exception):
    """The UI needs the token first; answered with a redirect to ``/login``."""

    def __init__(self, next_url: str) -> None:
        super().__init__(next_url)
        self.next_url = next_url


def _when(v: datetime | None) -> str:
    return "" if v is None else v.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def _score(v: float | None) -> str:
    return "–" if v is None else f"{v:.2f}"


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{v * 100:.1f} %"


#: Characters of each text (question, answer, context, document, expected answer) the trace page shows; the
#: rest is behind a "show the whole trace" link (``?full=1``). A 10 MB answer made a 10 MB page (plus
#: escaping) that the browser laid out in one block; the cut keeps the page small and says how much is left.
SHOWN_TEXT_CHARS = 20_000


def highlight_answer(answer: str, claims: Sequence[traces.Claim], limit: int | None = None) -> Markup:
    """``answer`` (its first ``limit`` characters when given) as HTML with each unsupported claim's span
    wrapped in ``<mark class="unsupported">``.

    A claim's span is its ``start``/``end`` offsets when they fit the answer, else the first occurrence of its
    text; overlapping spans merge; spans are found in the whole answer and then cut at ``limit``. Everything
    else is escaped."""
    spans: list[tuple[int, int]] = []
    for c in claims:
        if c.supported is not False:
            continue
        if c.start is not None and c.end is not None and 0 <= c.start < c.end <= len(answer):
            spans.append((c.start, c.end))
            continue
        at = answer.find(c.text.strip())
        if at >= 0 and c.text.strip():
            spans.append((at, at + len(c.text.strip())))
    spans.sort()
    merged: list[tuple[int, int]] = []
    for s, e in spans:
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((s, e))
    if limit is not None and len(answer) > limit:
        answer = answer[:limit]
        merged = [(s, min(e, limit)) for s, e in merged if s < limit]
    out: list[str] = []
    pos = 0
    for s, e in merged:
        out.append(str(escape(answer[pos:s])))
        out.append(f'<mark class="unsupported">{escape(answer[s:e])}</mark>')
        pos = e
    out.append(str(escape(answer[pos:])))
    return Markup("".join(out))


def _guess_format(filename: str | None, text: str) -> testsets.ImportFormat:
    name = (filename or "").lower()
    if name.endswith(".csv"):
        return "csv"
    if name.endswith(".json"):
        return "json"
    if name.endswith((".jsonl", ".ndjson")):
        return "jsonl"
    head = text.lstrip()
    if head.startswith("["):
        return "json"
    if head.startswith("{"):
        try:
            doc = json.loads(head)
        except ValueError:
            return "jsonl"
        return "json" if isinstance(doc, dict) and "cases" in doc else "jsonl"
    return "csv"


def _form_case(form: Mapping[str, Any], with_id: bool) -> dict[str, Any]:
    row: dict[str, Any] = {}
    if with_id and str(form.get("id", "")).strip():
        row["id"] = str(form["id"]).strip()
    for key in ("question", "expected_answer", "answer"):
        v = str(form.get(key, "")).strip()
        if v:
            row[key] = v
    kw = str(form.get("keywords", "")).strip()
    if kw:
        row["keywords"] = kw
    ctx_lines = [c.strip() for c in str(form.get("contexts", "")).split("\n") if c.strip()]
    if ctx_lines:
        row["contexts"] = ctx_lines
    return row


class Ui:
    """The UI's renderer and routes for one :class:`PortalContext`."""

    def __init__(self, ctx: PortalContext) -> None:
        self.ctx = ctx
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(_HERE / "templates")),
            autoescape=jinja2.select_autoescape(["html"]),
            undefined=jinja2.ChainableUndefined,
        )
        self.env.filters["when"] = _when
        self.env.filters["score"] = _score
        self.env.filters["pct"] = _pct
        self.env.filters["thousands"] = "{:,}".format
        self.env.globals["hist"] = histogram_svg
        self.env.filters["st"] = lambda value, t: t.get(f"st_{value}", t.get(str(value), str(value)))
        self.env.filters["reason"] = reason_html

    # -- rendering --------------------------------------------------------------------------------------------
    def lang(self, request: Request) -> str:
        return pick_language(
            request.query_params.get("lang"),
            request.cookies.get(LANG_COOKIE),
            request.headers.get("accept-language"),
        )

    def render(self, request: Request, template: str, status: int = 200, **values: Any) -> HTMLResponse:
        lang = self.lang(request)
        t = translator(lang)
        csrf = request.cookies.get(CSRF_COOKIE) or new_csrf_token()
        other = "zh" if lang == "en" else "en"
        params = {k: v for k, v in request.query_params.items() if k not in ("msg", "err")}
        params["lang"] = other
        html = self.env.get_template(template).render(
            t=t,
            lang=lang,
            other_lang=other,
            lang_url=f"{request.url.path}?{urlencode(params)}",
            csrf=csrf,
            signed_in=self.ctx.options.token is not None and session_ok(request, self.ctx.options.token),
            msg=values.pop("msg", None) or notice(t, "msg", request.query_params.get("msg")),
            err=values.pop("err", None) or notice(t, "err", request.query_params.get("err")),
            **values,
        )
        resp = HTMLResponse(html, status_code=status)
        if request.cookies.get(CSRF_COOKIE) != csrf:
            resp.set_cookie(CSRF_COOKIE, csrf, httponly=True, samesite="strict")
        if request.query_params.get("lang") in ("en", "zh"):
            resp.set_cookie(LANG_COOKIE, lang, max_age=365 * 86400, samesite="lax")
        return resp

    def error_page(self, request: Request, status: int, detail: str) -> Response:
        token = self.ctx.options.token
        if (
            status in (401, 403)
            and request.method == "GET"
            and token is not None
            and not session_ok(request, token)
        ):
            return RedirectResponse(f"/login?next={quote(request.url.path)}", status_code=303)
        return self.render(request, "error.html", status=status, status_code=status, detail=detail)

    # -- guards -----------------------------------------------------------------------------------------------
    def guard(self, request: Request) -> None:
        if not session_ok(request, self.ctx.options.token):
            raise LoginRequired(request.url.path + (f"?{request.url.query}" if request.url.query else ""))

    async def form(self, request: Request) -> Mapping[str, Any]:
        """The posted form after the session and CSRF checks."""
        self.guard(request)
        form = await request.form()
        token = form.get("csrf_token")
        check_csrf(request, token if isinstance(token, str) else None)
        return form


def _redirect(url: str, **params: str) -> RedirectResponse:
    q = {k: v for k, v in params.items() if v}
    return RedirectResponse(url + (f"?{urlencode(q)}" if q else ""), status_code=303)


def build_router(ui: Ui) -> APIRouter:
    """The UI's routes."""
    r = APIRouter(include_in_schema=False)
    ctx = ui.ctx
    store = ctx.store

    @r.get("/")
    async def home() -> RedirectResponse:
        return RedirectResponse("/test-sets", status_code=303)

    @r.get("/login")
    async def login_page(request: Request, next: str = "/") -> HTMLResponse:
        return ui.render(request, "login.html", next=next if next.startswith("/") else "/")

    @r.post("/login")
    async def login(request: Request) -> Response:
        form = await request.form()
        token = form.get("csrf_token")
        check_csrf(request, token if isinstance(token, str) else None)
        given = str(form.get("token", ""))
        nxt = str(form.get("next", "/"))
        nxt = nxt if nxt.startswith("/") and not nxt.startswith("//") else "/"
        configured = ctx.options.token
        if configured is None:
            return _redirect(nxt)
        if not token_matches(given, configured):
            return ui.render(
                request, "login.html", status=403, next=nxt, err=translator(ui.lang(request))["login_wrong"]
            )
        resp = _redirect(nxt)
        resp.set_cookie(SESSION_COOKIE, session_value(configured), httponly=True, samesite="strict")
        return resp

    @r.post("/logout")
    async def logout(request: Request) -> Response:
        await ui.form(request)
        resp = _redirect("/login")
        resp.delete_cookie(SESSION_COOKIE)
        return resp

    # -- test sets --------------------------------------------------------------------------------------------
    async def sets_page(
        request: Request, kb: str = "", cursor: str | None = None, **extra: Any
    ) -> HTMLResponse:
        page = await testsets.list_test_sets(store, knowledge_base=kb or None, cursor=cursor)
        kbs = await testsets.knowledge_bases(store)
        return ui.render(
            request,
            "test_sets.html",
            section="test_sets",
            sets=page.items,
            next_cursor=page.next_cursor,
            kbs=kbs,
            kb_filter=kb,
            **extra,
        )

    @r.get("/test-sets")
    async def test_sets_page(request: Request, kb: str = "", cursor: str | None = None) -> HTMLResponse:
        ui.guard(request)
        return await sets_page(request, kb, cursor)

    @r.post("/test-sets")
    async def create_test_set(request: Request) -> Response:
        form = await ui.form(request)
        name = str(form.get("name", "")).strip()
        try:
            await testsets.create_test_set(
                store,
                name,
                knowledge_base=str(form.get("knowledge_base", "")).strip() or None,
                description=str(form.get("description", "")).strip() or None,
            )
        except ServiceError as e:
            return await sets_page(request, status=422, err=str(e))
        return _redirect(f"/test-sets/{quote(name)}", msg="created_msg")

    @r.post("/test-sets/{name}/edit")
    async def edit_test_set(request: Request, name: str) -> Response:
        form = await ui.form(request)
        changes = {k: (str(form.get(k, "")).strip() or None) for k in ("knowledge_base", "description")}
        await testsets.update_test_set(store, name, changes)
        return _redirect("/test-sets", msg="saved")

    @r.post("/test-sets/{name}/delete")
    async def delete_test_set(request: Request, name: str) -> Response:
        await ui.form(request)
        await testsets.delete_test_set(store, name)
        return _redirect("/test-sets", msg="deleted")

    async def cases_page(
        request: Request, name: str, cursor: str | None = None, **extra: Any
    ) -> HTMLResponse:
        info = await testsets.get_test_set_info(store, name)
        page = await testsets.list_cases(store, name, cursor=cursor, limit=200)
        return ui.render(
            request,
            "cases.html",
            section="test_sets",
            ts=info,
            cases=page.items,
            next_cursor=page.next_cursor,
            **extra,
        )

    @r.get("/test-sets/{name}")
    async def test_set_page(request: Request, name: str, cursor: str | None = None) -> HTMLResponse:
        ui.guard(request)
        return await cases_page(request, name, cursor)

    @r.post("/test-sets/{name}/cases")
    async def add_case(request: Request, name: str) -> Response:
        form = await ui.form(request)
        try:
            await testsets.add_case(store, name, _form_case(form, with_id=True))
        except ServiceError as e:  # an unknown test set (NotFoundError) is the 404 page
            return await cases_page(request, name, status=422, err=str(e))
        return _redirect(f"/test-sets/{quote(name)}", msg="saved")

    @r.get("/test-sets/{name}/cases/{case_id}/edit")
    async def edit_case_page(request: Request, name: str, case_id: str) -> HTMLResponse:
        ui.guard(request)
        case = await testsets.get_case(store, name, case_id)
        return ui.render(request, "case_edit.html", section="test_sets", name=name, case=case)

    @r.post("/test-sets/{name}/cases/{case_id}")
    async def save_case(request: Request, name: str, case_id: str) -> Response:
        form = await ui.form(request)
        old = await testsets.get_case(store, name, case_id)
        row = {
            k: v
            for k, v in old.items()
            if k not in ("question", "expected_answer", "answer", "keywords", "contexts", "doc_ids")
        }
        row.update(_form_case(form, with_id=False))
        try:
            await testsets.put_case(store, name, case_id, row)
        except ServiceError as e:
            return ui.render(
                request, "case_edit.html", 422, section="test_sets", name=name, case=old, err=str(e)
            )
        return _redirect(f"/test-sets/{quote(name)}", msg="saved")

    @r.post("/test-sets/{name}/cases/{case_id}/delete")
    async def delete_case(request: Request, name: str, case_id: str) -> Response:
        await ui.form(request)
        await testsets.delete_case(store, name, case_id)
        return _redirect(f"/test-sets/{quote(name)}", msg="deleted")

    @r.post("/test-sets/{name}/import")
    async def import_cases(request: Request, name: str) -> Response:
        form = await ui.form(request)
        upload = form.get("file")
        text = ""
        filename: str | None = None
        if isinstance(upload, UploadFile) and upload.filename:
            filename = upload.filename
            raw = await upload.read()
            try:
                text = raw.decode("utf-8-sig")
            except UnicodeDecodeError as e:
                return await cases_page(request, name, err=f"{filename}: not UTF-8 (byte {e.start})")
        if not text.strip():
            text = str(form.get("text", ""))
        if not text.strip():
            return _redirect(f"/test-sets/{quote(name)}")
        chosen = str(form.get("format", ""))
        fmt: testsets.ImportFormat = (
            "json"
            if chosen == "json"
            else "jsonl"
            if chosen == "jsonl"
            else "csv"
            if chosen == "csv"
            else _guess_format(filename, text)
        )
        mode: testsets.ImportMode = "replace" if form.get("mode") == "replace" else "append"
        try:
            result = await testsets.import_cases(store, name, text, fmt, mode=mode)
        except ServiceError as e:  # an unknown test set (NotFoundError) is the 404 page
            return await cases_page(request, name, err=str(e))
        return await cases_page(request, name, import_result=result)

    # -- live traffic and traces ------------------------------------------------------------------------------
    @r.get("/traffic")
    async def traffic(request: Request) -> HTMLResponse:
        ui.guard(request)
        q = request.query_params
        f = {k: (q.get(k) or None) for k in ("since", "until", "app", "scenario", "judge", "outcome")}
        f["since"] = f["since"] or "24h"
        start, end = window(f["since"], f["until"], timedelta(hours=24))
        outcome = (
            f["outcome"] if f["judge"] and f["outcome"] in ("pass", "fail", "error", "skipped") else None
        )
        filters = traces.TraceFilters.model_validate(
            {
                "app": f["app"],
                "scenario": f["scenario"],
                "judge": f["judge"],
                "outcome": outcome,
                "since": start,
                "until": end,
            }
        )
        cursor = q.get("cursor")
        page = await traces.list_traces(store, filters, limit=50, cursor=cursor, redact_text=ctx.redact_text)
        more_params = {k: v for k, v in f.items() if v}
        more_url = None
        if page.next_cursor:
            more_url = "/traffic?" + urlencode({**more_params, "cursor": page.next_cursor})
        if request.headers.get("hx-request") and cursor:
            html = ui.env.get_template("trace_rows.html").render(
                t=translator(ui.lang(request)),
                traces=page.items,
                next_cursor=page.next_cursor,
                more_url=more_url,
            )
            return HTMLResponse(html)
        scores = await stats.score_stats(store, since=start, until=end, judge=f["judge"], app=f["app"])
        series = await stats.timeseries(store, since=start, until=end, judge=f["judge"], app=f["app"])
        judge_names = sorted(set(ctx.judges) | {s.judge for s in scores})
        return ui.render(
            request,
            "traffic.html",
            section="traffic",
            f=f,
            traces=page.items,
            next_cursor=page.next_cursor,
            more_url=more_url,
            scores=scores,
            series=series,
            ts_chart=timeseries_svg(series, start, end),
            judge_names=judge_names,
        )

    async def show_trace(
        request: Request, trace_id: str, *, full: bool = False, **extra: Any
    ) -> HTMLResponse:
        detail = await traces.get_trace(store, trace_id)
        unsupported = traces.unsupported_claims(detail)
        sets = (await testsets.list_test_sets(store, limit=200)).items
        cut = None if full else SHOWN_TEXT_CHARS
        return ui.render(
            request,
            "trace.html",
            section="traffic",
            tr=detail,
            cut=cut,
            answer_html=highlight_answer(detail.answer or "", unsupported, cut),
            has_unsupported=bool(unsupported),
            test_sets=sets,
            **extra,
        )

    @r.get("/traces/{trace_id}")
    async def trace_page(request: Request, trace_id: str, full: bool = False) -> HTMLResponse:
        """The trace page; each text longer than :data:`SHOWN_TEXT_CHARS` is cut there unless ``full``."""
        ui.guard(request)
        return await show_trace(request, trace_id, full=full)

    @r.post("/traces/{trace_id}/copy")
    async def copy_trace(request: Request, trace_id: str) -> Response:
        form = await ui.form(request)
        name = str(form.get("test_set", ""))
        try:
            row = await traces.copy_to_test_set(
                store,
                trace_id,
                name,
                case_id=str(form.get("case_id", "")).strip() or None,
                expected_answer=str(form.get("expected_answer", "")).strip() or None,
            )
        except (ServiceError, NotFoundError) as e:  # e.g. the chosen test set was deleted meanwhile
            return await show_trace(request, trace_id, err=str(e))
        t = translator(ui.lang(request))
        return await show_trace(request, trace_id, msg=t["copied"].format(name=name, case=row["id"]))

    return r


def mount(
    app: FastAPI, ctx: PortalContext, extra: Sequence[Callable[[Ui], APIRouter]] = ()
) -> Callable[[Request, int, str], Response]:
    """Add the static files and the UI's routes to ``app``; return the HTML error page renderer."""
    ui = Ui(ctx)
    app.mount("/static", StaticFiles(directory=str(_HERE / "static")), name="static")

    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> FileResponse:  # what a browser asks for when a page names no icon: the same SVG
        return FileResponse(_HERE / "static" / "favicon.svg", media_type="image/svg+xml")

    app.include_router(build_router(ui))
    for make in extra:
        app.include_router(make(ui))

    async def login_required(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, LoginRequired)
        return RedirectResponse(f"/login?next={quote(exc.next_url)}", status_code=303)

    app.add_exception_handler(LoginRequired, login_required)
    return ui.error_page
