"""The web UI's pages: thin adapters over :mod:`ragpulse.runs` and the portal services, rendered with Jinja2 (autoescaped).

Every page is usable without JavaScript except the live parts (run progress, "load more", the drawer), which use
the vendored htmx. Writes are POST forms with a CSRF token, answered with a redirect (303) to the page to show.
"""

from __future__ import annotations

import json
import math
import secrets
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, get_args
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

import jinja2
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from markupsafe import Markup, escape
from starlette.datastructures import UploadFile

from ragpulse.authcheck import token_matches
from ragpulse.errors import BadRequest, NotFoundError, ServiceError
from ragpulse.portal import stats, traces
from ragpulse.portal.auth import (
    CSRF_COOKIE,
    SESSION_COOKIE,
    SESSION_TTL_S,
    Access,
    auth_state,
    check_csrf,
    client_address,
    cookie_name,
    csrf_binding,
    csrf_token_for,
    session_ok,
)
from ragpulse.portal.context import PortalContext
from ragpulse.portal.problems import refuse_nul
from ragpulse.portal.ui.charts import histogram_svg, timeseries_svg
from ragpulse.portal.ui.flash import FLASH_COOKIE, Flash, form_values, read_flash, sign_flash
from ragpulse.portal.ui.i18n import LANG_COOKIE, error_text, notice, pick_language, reason_html, translator
from ragpulse.query import SOURCE_CHOICES, Page, window
from ragpulse.runs import testsets
from ragpulse.textclean import has_bidi_control, mark_bidi

__all__ = ["LoginRequired", "Ui", "UiDep", "get_ui", "highlight_answer", "mount", "router"]

_HERE = Path(__file__).parent
_WINDOWS = {"1h", "24h", "7d", "30d"}


class LoginRequired(Exception):
    """The UI needs the token first; answered with a redirect to ``/login``."""

    def __init__(self, next_url: str) -> None:
        super().__init__(next_url)
        self.next_url = next_url


def _when(v: datetime | None) -> Markup:
    """A time as ``<time datetime="…Z" title="… UTC">… UTC</time>``: UTC on the page (and as the tooltip);
    ``portal.js`` rewrites the text into the browser's time zone, with the zone's name, keeping UTC on hover."""
    if v is None:
        return Markup("")
    utc = v.astimezone(UTC)
    shown = utc.strftime("%Y-%m-%d %H:%M:%S") + " UTC"
    return Markup('<time datetime="{}" title="{}">{}</time>').format(
        utc.strftime("%Y-%m-%dT%H:%M:%SZ"), shown, shown
    )


def _score(v: float | None) -> str:
    return "–" if v is None else f"{v:.2f}"


def _seconds(v: float | None) -> str:
    return "–" if v is None else f"{v:.3f} s"


def _ms(v: float | None) -> str:
    return "–" if v is None else f"{v:,.1f} ms"


def _ratio(v: float | None) -> str:
    """A proportion with four decimals (the review page's sensitivity, specificity and pass rates)."""
    return "–" if v is None else f"{v:.4f}"


def _tokens(u: traces.AppUsage) -> str:
    """The app's tokens of a trace or session as ``prompt / completion`` (summed over its LLM calls when known,
    else the answering call's); ``–`` when the source reported none."""
    p = u.total_prompt_tokens if u.total_prompt_tokens is not None else u.prompt_tokens
    c = u.total_completion_tokens if u.total_completion_tokens is not None else u.completion_tokens
    if p is None and c is None:
        return "–"
    return f"{p or 0:,} / {c or 0:,}"


def _cost(v: float | None) -> str:
    return "–" if v is None else f"{v:,.6f}"


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{v * 100:.1f} %"


#: Characters of each text (question, answer, context, document, expected answer) the trace page shows; the
#: rest is behind a "show the whole trace" link (``?full=1``). A 10 MB answer made a 10 MB page (plus
#: escaping) that the browser laid out in one block; the cut keeps the page small and says how much is left.
SHOWN_TEXT_CHARS = 20_000


def highlight_answer(answer: str, claims: Sequence[traces.Claim], limit: int | None = None) -> Markup:
    """``answer`` (its first ``limit`` characters when given) as HTML with each unsupported claim's span
    wrapped in ``<mark class="unsupported">`` and each bidirectional control shown by name
    (:func:`~ragpulse.textclean.mark_bidi`).

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
    for s, e in merged:  # each piece escaped, its bidirectional controls shown by name
        out.append(str(escape(mark_bidi(answer[pos:s]))))
        out.append(f'<mark class="unsupported">{escape(mark_bidi(answer[s:e]))}</mark>')
        pos = e
    out.append(str(escape(mark_bidi(answer[pos:]))))
    return Markup("".join(out))


def _finalize(value: Any) -> Any:
    """Every ``{{ … }}`` of the templates: a bidirectional control in plain text is shown by its name
    (:func:`~ragpulse.textclean.mark_bidi`) instead of reordering what is around it (a case made to look like
    another); filters such as ``urlencode`` ran before, so links keep the exact id."""
    if isinstance(value, str) and not isinstance(value, Markup) and has_bidi_control(value):
        return mark_bidi(value)
    return value


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


def judge_thresholds(ctx: PortalContext) -> dict[str, float]:
    """The pass threshold of each judge ``serve`` built, else of each judge configured with one
    (``judge.options.<name>.threshold``), by name."""
    out: dict[str, float] = {}
    for name, options in ctx.settings.judge.options.items():
        value = options.get("threshold") if isinstance(options, dict) else None
        if isinstance(value, int | float):
            out[name] = float(value)
    for name, judge in ctx.judges.items():
        value = getattr(judge, "threshold", None)
        if isinstance(value, int | float):
            out[name] = float(value)
    return out


def _seg(value: Any) -> str:
    return quote(str(value), safe="")


class Ui:
    """The UI's renderer and routes for one :class:`PortalContext`."""

    def __init__(self, ctx: PortalContext, access: Access) -> None:
        self.ctx = ctx
        self.access = access
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(_HERE / "templates")),
            autoescape=jinja2.select_autoescape(["html"]),
            undefined=jinja2.ChainableUndefined,
            finalize=_finalize,
        )
        self.env.filters["when"] = _when
        self.env.filters["score"] = _score
        self.env.filters["pct"] = _pct
        self.env.filters["seconds"] = _seconds
        self.env.filters["ratio"] = _ratio
        self.env.filters["tokens"] = _tokens
        self.env.filters["cost"] = _cost
        self.env.filters["ms"] = _ms
        self.env.filters["thousands"] = "{:,}".format
        self.env.globals["hist"] = histogram_svg
        self.env.filters["st"] = lambda value, t: t.get(f"st_{value}", t.get(str(value), str(value)))
        self.env.filters["reason"] = reason_html
        self.env.filters["error"] = (
            error_text  # ``{{ message | error(t) }}``: ragpulse's own phrases translated
        )
        #: an id (case, trace, run, test set) or cursor as one URL path segment or query value: every character
        #: but the unreserved ones encoded (``/`` → ``%2F``), so no id can become another path
        self.env.filters["seg"] = _seg

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
        binding = csrf_binding(request)
        new_binding = None
        if binding is None:
            binding = new_binding = secrets.token_urlsafe(32)
        csrf = csrf_token_for(self.access.key_now, binding)
        flash = read_flash(
            self.access.key_now, request.cookies.get(cookie_name(request, FLASH_COOKIE)), request.url.path
        )
        if flash is not None:
            values.setdefault("err", flash.err)
            if flash.msg and flash.msg in t:
                values.setdefault("msg", t[flash.msg].format(**flash.data.get("args", {})))
        values.setdefault("kept", flash.form if flash is not None else {})
        values.setdefault("flash_data", flash.data if flash is not None else {})
        other = "zh" if lang == "en" else "en"
        params = {k: v for k, v in request.query_params.items() if k not in ("msg", "err")}
        params["lang"] = other
        html = self.env.get_template(template).render(
            t=t,
            lang=lang,
            other_lang=other,
            # a query-only reference: the page itself in the other language, never another host (the path
            # of ``http://portal//evil.example/x`` would make ``//evil.example/x`` a link to evil.example)
            lang_url=f"?{urlencode(params)}",
            csrf=csrf,
            signed_in=auth_state(request) == "session",
            msg=values.pop("msg", None) or notice(t, "msg", request.query_params.get("msg")),
            # an error is ragpulse's English message: its fixed phrases are shown in the page's language
            err=error_text(values.pop("err", None), t) or notice(t, "err", request.query_params.get("err")),
            **values,
        )
        resp = HTMLResponse(html, status_code=status)
        if flash is not None:  # shown once
            resp.delete_cookie(
                cookie_name(request, FLASH_COOKIE),
                path="/",
                secure=request.url.scheme == "https",
                httponly=True,
                samesite="strict",
            )
        if new_binding is not None:
            set_cookie(request, resp, CSRF_COOKIE, new_binding)
        if request.query_params.get("lang") in ("en", "zh"):
            resp.set_cookie(
                LANG_COOKIE, lang, max_age=365 * 86400, samesite="lax", secure=request.url.scheme == "https"
            )
        return resp

    def back(
        self,
        request: Request,
        url: str,
        *,
        err: str | None = None,
        msg: str | None = None,
        form: Mapping[str, Any] | None = None,
        data: Mapping[str, Any] | None = None,
    ) -> RedirectResponse:
        """The answer to a form post (POST-redirect-GET): a redirect (303) to the page ``url`` (path and query),
        with what it must show once — the error ``err``, the notice ``msg`` (a catalogue key, formatted with
        ``data["args"]``), the posted ``form``'s values, ``data`` — in the signed flash cookie
        (:mod:`ragpulse.portal.ui.flash`)."""
        resp = RedirectResponse(url, status_code=303)
        if err or msg or form or data:
            flash = Flash(
                path=unquote(url.partition("?")[0]),  # as the page's request.url.path will be
                err=err,
                msg=msg,
                form=form_values(form) if form is not None else {},
                data=dict(data or {}),
            )
            set_cookie(request, resp, FLASH_COOKIE, sign_flash(self.access.key_now, flash))
        return resp

    def error_page(self, request: Request, status: int, detail: str) -> Response:
        if status in (401, 403) and request.method == "GET" and not session_ok(request):
            return RedirectResponse(f"/login?next={quote(request.url.path)}", status_code=303)
        if request.method == "POST" and status not in (401, 403, 413, 421, 429):
            # a form post that failed (e.g. a test set deleted meanwhile): back to the page it came from
            # (POST-redirect-GET), so a reload or a language switch never lands on the POST-only address
            return self.back(request, _referring_page(request), err=detail)
        return self.render(
            request,
            "error.html",
            status=status,
            status_code=status,
            detail=error_text(detail, translator(self.lang(request))),
        )

    # -- guards -----------------------------------------------------------------------------------------------
    def guard(self, request: Request) -> None:
        if not session_ok(request):
            raise LoginRequired(request.url.path + (f"?{request.url.query}" if request.url.query else ""))

    async def form(self, request: Request) -> Mapping[str, Any]:
        """The posted form after the session and CSRF checks."""
        self.guard(request)
        form = await request.form()
        token = form.get("csrf_token")
        check_csrf(request, self.access, token if isinstance(token, str) else None)
        return form


def set_cookie(request: Request, resp: Response, base: str, value: str, max_age: int | None = None) -> None:
    """Set the portal cookie ``base`` (``__Host-`` prefixed and ``Secure`` under HTTPS; HttpOnly, SameSite=Strict,
    path ``/``)."""
    https = request.url.scheme == "https"
    resp.set_cookie(
        cookie_name(request, base),
        value,
        max_age=max_age,
        path="/",
        secure=https,
        httponly=True,
        samesite="strict",
    )


def _referring_page(request: Request) -> str:
    """The path and query of the page a form was posted from (its ``Referer``, on this host), else ``/``; never
    another host."""
    ref = urlsplit(request.headers.get("referer", ""))
    if ref.netloc != request.url.netloc or not ref.path.startswith("/") or ref.path.startswith(("//", "/\\")):
        return "/"
    return ref.path + (f"?{ref.query}" if ref.query else "")


def _redirect(url: str, **params: str) -> RedirectResponse:
    q = {k: v for k, v in params.items() if v}
    return RedirectResponse(url + (f"?{urlencode(q)}" if q else ""), status_code=303)


def get_ui(request: Request) -> Ui:
    """The app's :class:`Ui` (set by :func:`mount`): the dependency of every UI route."""
    ui: Ui = request.app.state.ui
    return ui


#: A UI route's parameter ``ui: UiDep`` gets the app's :class:`Ui`.
UiDep = Annotated[Ui, Depends(get_ui)]

#: The UI's routes (module level, like the REST routers in :mod:`ragpulse.portal.rest`).
router = APIRouter(include_in_schema=False)


@router.get("/")
async def home(ui: UiDep) -> RedirectResponse:
    return RedirectResponse("/test-sets", status_code=303)


@router.get("/login")
async def login_page(ui: UiDep, request: Request, next: str = "/") -> HTMLResponse:
    return ui.render(request, "login.html", next=next if next.startswith("/") else "/")


@router.post("/login")
async def login(ui: UiDep, request: Request) -> Response:
    client = client_address(request)
    ui.access.limiter.check(client)
    form = await request.form()
    token = form.get("csrf_token")
    check_csrf(request, ui.access, token if isinstance(token, str) else None)
    given = str(form.get("token", ""))
    nxt = str(form.get("next", "/"))
    nxt = nxt if nxt.startswith("/") and not nxt.startswith(("//", "/\\")) else "/"
    configured = ui.ctx.options.token
    if configured is None:
        return _redirect(nxt)
    if not token_matches(given, configured):
        ui.access.limiter.failed(client, "login")
        return ui.back(
            request, f"/login?{urlencode({'next': nxt})}", err=translator(ui.lang(request))["login_wrong"]
        )
    resp = _redirect(nxt)
    set_cookie(request, resp, SESSION_COOKIE, await ui.access.start_session(), max_age=SESSION_TTL_S)
    return resp


@router.post("/logout")
async def logout(ui: UiDep, request: Request) -> Response:
    await ui.form(request)
    resp = _redirect("/login")
    cookie = request.cookies.get(cookie_name(request, SESSION_COOKIE))
    if cookie:
        await ui.access.end_session(cookie)
    resp.delete_cookie(
        cookie_name(request, SESSION_COOKIE),
        path="/",
        secure=request.url.scheme == "https",
        httponly=True,
        samesite="strict",
    )
    return resp


# -- test sets --------------------------------------------------------------------------------------------
async def sets_page(
    ui: Ui, request: Request, kb: str = "", cursor: str | None = None, **extra: Any
) -> HTMLResponse:
    page = await testsets.list_test_sets(ui.ctx.store, knowledge_base=kb or None, cursor=cursor)
    kbs = await testsets.knowledge_bases(ui.ctx.store)
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


@router.get("/test-sets")
async def test_sets_page(
    ui: UiDep, request: Request, kb: str = "", cursor: str | None = None
) -> HTMLResponse:
    ui.guard(request)
    return await sets_page(ui, request, kb, cursor)


@router.post("/test-sets")
async def create_test_set(ui: UiDep, request: Request) -> Response:
    form = await ui.form(request)
    name = str(form.get("name", "")).strip()
    try:
        created = await testsets.create_test_set(
            ui.ctx.store,
            name,
            knowledge_base=str(form.get("knowledge_base", "")).strip() or None,
            description=str(form.get("description", "")).strip() or None,
        )
    except ServiceError as e:
        return ui.back(request, "/test-sets", err=str(e), form=form)
    return _redirect(f"/test-sets/{_seg(created.name)}", msg="created_msg")


@router.post("/test-sets/{name}/edit")
async def edit_test_set(ui: UiDep, request: Request, name: str) -> Response:
    form = await ui.form(request)
    changes = {k: (str(form.get(k, "")).strip() or None) for k in ("knowledge_base", "description")}
    await testsets.update_test_set(ui.ctx.store, name, changes)
    return _redirect("/test-sets", msg="saved")


@router.post("/test-sets/{name}/delete")
async def delete_test_set(ui: UiDep, request: Request, name: str) -> Response:
    await ui.form(request)
    await testsets.delete_test_set(ui.ctx.store, name)
    return _redirect("/test-sets", msg="deleted")


async def cases_page(
    ui: Ui, request: Request, name: str, cursor: str | None = None, **extra: Any
) -> HTMLResponse:
    info = await testsets.get_test_set_info(ui.ctx.store, name)
    page = await testsets.list_cases(ui.ctx.store, name, cursor=cursor, limit=200)
    return ui.render(
        request,
        "cases.html",
        section="test_sets",
        ts=info,
        cases=page.items,
        next_cursor=page.next_cursor,
        **extra,
    )


@router.get("/test-sets/{name}")
async def test_set_page(ui: UiDep, request: Request, name: str, cursor: str | None = None) -> HTMLResponse:
    ui.guard(request)
    return await cases_page(ui, request, name, cursor)


@router.post("/test-sets/{name}/cases")
async def add_case(ui: UiDep, request: Request, name: str) -> Response:
    form = await ui.form(request)
    try:
        await testsets.add_case(
            ui.ctx.store, name, _form_case(form, with_id=True), max_cases=ui.ctx.options.max_test_set_cases
        )
    except ServiceError as e:  # an unknown test set (NotFoundError) is the 404 page
        return ui.back(request, f"/test-sets/{_seg(name)}", err=str(e), form=form)
    return _redirect(f"/test-sets/{_seg(name)}", msg="saved")


@router.get("/test-sets/{name}/cases/{case_id:path}")
async def edit_case_page(ui: UiDep, request: Request, name: str, case_id: str) -> HTMLResponse:
    ui.guard(request)
    case = await testsets.get_case(ui.ctx.store, name, case_id)
    return ui.render(request, "case_edit.html", section="test_sets", name=name, case=case)


@router.post("/test-sets/{name}/delete-case/{case_id:path}")
async def delete_case(ui: UiDep, request: Request, name: str, case_id: str) -> Response:
    await ui.form(request)
    await testsets.delete_case(ui.ctx.store, name, case_id)
    return _redirect(f"/test-sets/{_seg(name)}", msg="deleted")


@router.post("/test-sets/{name}/cases/{case_id:path}")
async def save_case(ui: UiDep, request: Request, name: str, case_id: str) -> Response:
    form = await ui.form(request)
    old = await testsets.get_case(ui.ctx.store, name, case_id)
    row = {
        k: v
        for k, v in old.items()
        if k not in ("question", "expected_answer", "answer", "keywords", "contexts", "doc_ids")
    }
    row.update(_form_case(form, with_id=False))
    try:
        await testsets.put_case(ui.ctx.store, name, case_id, row, max_cases=ui.ctx.options.max_test_set_cases)
    except ServiceError as e:
        return ui.back(request, f"/test-sets/{_seg(name)}/cases/{_seg(case_id)}", err=str(e), form=form)
    return _redirect(f"/test-sets/{_seg(name)}", msg="saved")


@router.post("/test-sets/{name}/import")
async def import_cases(ui: UiDep, request: Request, name: str) -> Response:
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
            return ui.back(request, f"/test-sets/{_seg(name)}", err=f"{filename}: not UTF-8 (byte {e.start})")
    if not text.strip():
        text = str(form.get("text", ""))
    if not text.strip():
        return _redirect(f"/test-sets/{_seg(name)}")
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
        result = await testsets.import_cases(
            ui.ctx.store, name, text, fmt, mode=mode, max_cases=ui.ctx.options.max_test_set_cases
        )
    except ServiceError as e:  # an unknown test set (NotFoundError) is the 404 page
        return ui.back(request, f"/test-sets/{_seg(name)}", err=str(e), form=form)
    summary = {
        "created": len(result.created),
        "updated": len(result.updated),
        "rejected_count": len(result.rejected),
        "rejected": [[r.line, r.reason[:300]] for r in result.rejected],
    }
    return ui.back(request, f"/test-sets/{_seg(name)}", data={"import_result": summary})


# -- live traffic and traces ------------------------------------------------------------------------------
#: The trace list's filters the Live traffic page takes from its URL (and keeps in it: the form is a GET form and
#: "load more" carries them), so a filtered view can be shared by its address.
TRAFFIC_FILTERS = (
    "since",
    "until",
    "app",
    "scenario",
    "judge",
    "outcome",
    "min_score",
    "max_score",
    "text",
    "q",
    "model",
    "min_latency_s",
    "max_latency_s",
    "source",
    "trace_outcome",
    "run_id",
    "session",
)
_NUMBER_FILTERS = ("min_score", "max_score", "min_latency_s", "max_latency_s")
#: The trace outcomes the ``trace_outcome`` filter takes (as the API's).
TRACE_OUTCOMES: tuple[str, ...] = get_args(traces.TraceOutcomeName)


def traffic_filters(
    query: Mapping[str, str],
) -> tuple[dict[str, str | None], traces.TraceFilters, str | None]:
    """The Live traffic page's filters from its ``query``: the raw values (``since`` defaults to ``24h``), the
    :class:`~ragpulse.portal.traces.TraceFilters` they make, and an error to show (``None``: all understood; a
    value that is not understood is left out of the filters and named in the error)."""
    f: dict[str, str | None] = {k: (query.get(k) or "").strip() or None for k in TRAFFIC_FILTERS}
    # Grafana's own time parameters (epoch milliseconds) name the same window
    f["since"] = f["since"] or query.get("from") or "24h"
    f["until"] = f["until"] or query.get("to") or None
    f["source"] = f["source"] or "live"
    problems: list[str] = []
    start, end = window(f["since"], f["until"], timedelta(hours=24))
    numbers: dict[str, float | None] = {}
    for k in _NUMBER_FILTERS:
        raw = f[k]
        try:
            numbers[k] = float(raw) if raw is not None else None
            if numbers[k] is not None and not math.isfinite(numbers[k] or 0.0):
                raise ValueError(raw)
        except ValueError:
            numbers[k] = None
            problems.append(f"{k}: {raw!r} is not a number")
    judge = f["judge"]
    # without a judge an outcome or score range means "any judge's judgement" (as in the API); a value the API
    # refuses (422) is left out here and named in the error, never silently dropped
    choices: dict[str, Sequence[str]] = {
        "outcome": traces.JUDGEMENT_OUTCOMES,
        "trace_outcome": TRACE_OUTCOMES,
        "source": SOURCE_CHOICES,
    }
    for k, allowed in choices.items():
        if f[k] is not None and f[k] not in allowed:
            problems.append(f"{k}: {f[k]!r} is not one of {', '.join(allowed)}")
    outcome = f["outcome"] if f["outcome"] in traces.JUDGEMENT_OUTCOMES else None
    values: dict[str, Any] = {
        "app": f["app"],
        "scenario": f["scenario"],
        "judge": judge,
        "outcome": outcome,
        "min_score": numbers["min_score"],
        "max_score": numbers["max_score"],
        "since": start,
        "until": end,
        "text": f["text"],
        "q": f["q"],
        "model": f["model"],
        "min_latency_s": numbers["min_latency_s"],
        "max_latency_s": numbers["max_latency_s"],
        "source": f["source"] if f["source"] in SOURCE_CHOICES else "live",
        "trace_outcome": f["trace_outcome"] if f["trace_outcome"] in TRACE_OUTCOMES else None,
        "run_id": f["run_id"],
        "session": f["session"],
    }
    return f, traces.TraceFilters.model_validate(values), "; ".join(problems) or None


@router.get("/traffic")
async def traffic(ui: UiDep, request: Request) -> HTMLResponse:
    ui.guard(request)
    return await traffic_page(ui, request, request.query_params)


async def traffic_page(
    ui: Ui, request: Request, query: Mapping[str, str], status: int = 200, **extra: Any
) -> HTMLResponse:
    """The Live traffic page for the filters in ``query`` (``extra``: ``msg``/``err``/``rejected`` to show).

    A filter value the API refuses (a score that is not a number, an unknown outcome, a minimum latency above the
    maximum, a cursor it did not make …) is answered as the API answers it, 422, with the page saying which and
    listing no trace (the form keeps what was typed); never a list under fewer filters than were asked for."""
    f, filters, err = traffic_filters(query)
    start, end = filters.since, filters.until
    assert start is not None
    assert end is not None
    cursor = query.get("cursor")
    try:
        if err is not None:
            status = 422
            page: Page[traces.TraceSummary] = Page(items=[])
        else:
            page = await traces.list_traces(
                ui.ctx.store, filters, limit=50, cursor=cursor, redact_text=ui.ctx.redact_text
            )
    except BadRequest as e:  # the filters together (min latency above max, …) or the cursor: as the API, 422
        err, status = str(e), 422
        page = Page(items=[])
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
            bulk=True,
        )
        return HTMLResponse(html)
    source = filters.source
    scores = await stats.score_stats(
        ui.ctx.store, since=start, until=end, judge=f["judge"], app=f["app"], source=source
    )
    series = await stats.timeseries(
        ui.ctx.store, since=start, until=end, judge=f["judge"], app=f["app"], source=source
    )
    judge_names = sorted(set(ui.ctx.judges) | {s.judge for s in scores})
    sets = (await testsets.list_test_sets(ui.ctx.store, limit=200)).items
    return ui.render(
        request,
        "traffic.html",
        status=status,
        section="traffic",
        f=f,
        traces=page.items,
        next_cursor=page.next_cursor,
        more_url=more_url,
        scores=scores,
        series=series,
        ts_chart=timeseries_svg(series, start, end, translator(ui.lang(request))),
        thresholds=judge_thresholds(ui.ctx),
        judge_names=judge_names,
        text_search=not ui.ctx.redact_text,
        test_sets=sets,
        bulk=bool(sets),
        back=urlencode(more_params),
        sources=SOURCE_CHOICES,
        window_start=start,
        window_end=end,
        outcomes=traces.JUDGEMENT_OUTCOMES,
        **{"err": err, **extra},
    )


@router.post("/traffic/add-to-test-set")
async def bulk_add(ui: UiDep, request: Request) -> Response:
    """Add the ticked traces of the Live traffic list to a test set, each with the expected answer typed in its
    row (empty: the trace's own); answered (POST-redirect-GET) with the same filtered list, how many were added
    and the traces not added with why (flash ``data["rejected"]``)."""
    form = await ui.form(request)
    back = parse_qs(str(form.get("back", "")))
    query = {k: v[0] for k, v in back.items() if k in TRAFFIC_FILTERS and v}
    url = "/traffic" + (f"?{urlencode(query)}" if query else "")
    picked = [str(v) for v in form.getlist("pick")]  # type: ignore[attr-defined]
    expected = dict(
        zip(
            (str(v) for v in form.getlist("expected_for")),  # type: ignore[attr-defined]
            (str(v) for v in form.getlist("expected")),  # type: ignore[attr-defined]
            strict=False,
        )
    )
    name = str(form.get("test_set", ""))
    if not picked:
        return ui.back(request, url, err=translator(ui.lang(request))["nothing_selected"])
    items = [traces.BulkItem(trace_id=tid, expected_answer=expected.get(tid) or None) for tid in picked]
    try:
        result = await traces.copy_traces_to_test_set(
            ui.ctx.store, name, items, max_cases=ui.ctx.options.max_test_set_cases
        )
    except (ServiceError, NotFoundError) as e:
        return ui.back(request, url, err=str(e))
    return ui.back(
        request,
        url,
        msg="added_cases",
        data={
            "args": {"n": len(result.created), "name": name},
            "rejected": [r.model_dump() for r in result.rejected],
        },
    )


async def show_trace(
    ui: Ui, request: Request, trace_id: str, *, full: bool = False, **extra: Any
) -> HTMLResponse:
    detail = await traces.get_trace(ui.ctx.store, trace_id, prices=ui.ctx.settings.export.model_prices)
    unsupported = traces.unsupported_claims(detail)
    sets = (await testsets.list_test_sets(ui.ctx.store, limit=200)).items
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


@router.get("/traces/{trace_id:path}")
async def trace_page(ui: UiDep, request: Request, trace_id: str, full: bool = False) -> HTMLResponse:
    """The trace page; each text longer than :data:`SHOWN_TEXT_CHARS` is cut there unless ``full``."""
    ui.guard(request)
    return await show_trace(ui, request, trace_id, full=full)


@router.get("/sessions/{session_id:path}")
async def session_page(ui: UiDep, request: Request, session_id: str) -> HTMLResponse:
    """A conversation: the session's traces in turn order with their verdicts, tokens and cost."""
    ui.guard(request)
    detail = await traces.get_session(ui.ctx.store, session_id, prices=ui.ctx.settings.export.model_prices)
    return ui.render(request, "session.html", section="traffic", s=detail, max_turns=traces.MAX_LIMIT)


@router.post("/traces/{trace_id:path}")
async def copy_trace(ui: UiDep, request: Request, trace_id: str) -> Response:
    form = await ui.form(request)
    name = str(form.get("test_set", ""))
    try:
        row = await traces.copy_to_test_set(
            ui.ctx.store,
            trace_id,
            name,
            case_id=str(form.get("case_id", "")).strip() or None,
            expected_answer=str(form.get("expected_answer", "")).strip() or None,
            max_cases=ui.ctx.options.max_test_set_cases,
        )
    except (ServiceError, NotFoundError) as e:  # e.g. the chosen test set was deleted meanwhile
        return ui.back(request, f"/traces/{_seg(trace_id)}", err=str(e), form=form)
    return ui.back(
        request, f"/traces/{_seg(trace_id)}", msg="copied", data={"args": {"name": name, "case": row["id"]}}
    )


def mount(
    app: FastAPI, ctx: PortalContext, access: Access, routers: Sequence[APIRouter] = ()
) -> Callable[[Request, int, str], Response]:
    """Add the static files and the UI's routes (this module's :data:`router` and ``routers``, e.g. the run
    pages') to ``app``; the routes reach the :class:`Ui` through :data:`UiDep` (``app.state.ui``). Returns the
    HTML error page renderer."""
    ui = Ui(ctx, access)
    app.state.ui = ui
    app.mount("/static", StaticFiles(directory=str(_HERE / "static")), name="static")

    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> FileResponse:  # what a browser asks for when a page names no icon: the same SVG
        return FileResponse(_HERE / "static" / "favicon.svg", media_type="image/svg+xml")

    app.include_router(router, dependencies=[Depends(refuse_nul)])
    for more in routers:
        app.include_router(more, dependencies=[Depends(refuse_nul)])

    async def login_required(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, LoginRequired)
        return RedirectResponse(f"/login?next={quote(exc.next_url)}", status_code=303)

    app.add_exception_handler(LoginRequired, login_required)
    return ui.error_page
