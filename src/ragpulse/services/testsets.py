"""Test sets and their cases, stored in PostgreSQL: list, create, edit, delete, bulk import.

Shared by the HTTP API (``/api/v1/test-sets``) and the CLI: a test set edited here is the one
``ragpulse replay --test-set NAME`` replays. A case is exchanged as the fields of a test-set file line
(``id``, ``question``, ``expected_answer``, ``keywords``, ``reference_contexts``, ``answer``, ``contexts``,
``doc_ids``, ``context_labels``, plus every metadata field at the top level), read by the same
:func:`ragpulse.replay.testset.parse_case` / :func:`~ragpulse.replay.testset.read_cases` as the CLI's loader.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from functools import partial
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, Field

from ragpulse.errors import NotFoundError
from ragpulse.model import TestCase, TestSet
from ragpulse.replay.testset import TestSetError, parse_case, read_cases
from ragpulse.services.errors import BadRequest, Conflict
from ragpulse.services.paging import DEFAULT_LIMIT, Page, decode_cursor, encode_cursor, time_key
from ragpulse.store import PostgresStore
from ragpulse.textclean import clean_json

__all__ = [
    "NAME_PATTERN",
    "ImportFormat",
    "ImportMode",
    "ImportResult",
    "ImportRow",
    "InvalidName",
    "KnowledgeBase",
    "RejectedRow",
    "RunId",
    "TestSetInfo",
    "TestSetName",
    "add_case",
    "case_row",
    "check_name",
    "create_test_set",
    "delete_case",
    "delete_test_set",
    "get_case",
    "get_test_set_info",
    "import_cases",
    "knowledge_bases",
    "list_cases",
    "list_test_sets",
    "load_test_set",
    "put_case",
    "update_test_set",
]

#: Names of test sets and run ids, in the CLI and the API alike (checked by :func:`check_name`).
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
_NAME = re.compile(NAME_PATTERN)

ImportMode = Literal["append", "replace"]
ImportFormat = Literal["json", "jsonl", "csv"]


class TestSetInfo(BaseModel):
    """A test set without its cases. Times are UTC."""

    __test__ = False
    name: str
    knowledge_base: str | None = None
    description: str | None = None
    case_count: int = 0
    created_at: datetime | None = None
    updated_at: datetime | None = None


class KnowledgeBase(BaseModel):
    """A knowledge base named by at least one test set, with its number of test sets."""

    name: str
    test_sets: int


class ImportRow(BaseModel):
    """An imported case: its input ``line`` and case ``id``."""

    line: int
    id: str


class RejectedRow(BaseModel):
    """A rejected input row: ``line`` (physical line for JSONL/CSV, header = 1; element index for a JSON
    array) and the ``reason``."""

    line: int
    reason: str


class ImportResult(BaseModel):
    """What an import did: cases ``created``, ``updated`` (same id existed) and ``rejected`` rows."""

    test_set: str
    mode: str
    created: list[ImportRow]
    updated: list[ImportRow]
    rejected: list[RejectedRow]
    case_count: int


class InvalidName(BadRequest, ValueError):
    """A test-set name or run id that breaks :data:`NAME_PATTERN` (a ``ValueError`` too, so that pydantic
    models of the API report it as a 422 naming the field)."""


def check_name(name: str, what: str = "test set name") -> str:
    """``name`` if it matches :data:`NAME_PATTERN` — the one check of test-set names and run ids (CLI and API).

    Raises:
        InvalidName: it does not (the message shows the rule and the pattern; CLI exit 2, HTTP 422).
    """
    if not _NAME.fullmatch(name):
        raise InvalidName(
            f"invalid {what} {name[:140]!r}: use letters, digits, '.', '_' and '-', starting with a letter or "
            f"digit, at most 128 characters (pattern {NAME_PATTERN})"
        )
    return name


_NAME_SCHEMA = Field(json_schema_extra={"pattern": NAME_PATTERN, "maxLength": 128})
#: A test-set name in an API body (validated by :func:`check_name`).
TestSetName = Annotated[str, _NAME_SCHEMA, AfterValidator(partial(check_name, what="test set name"))]
#: A run id in an API body (validated by :func:`check_name`).
RunId = Annotated[str, _NAME_SCHEMA, AfterValidator(partial(check_name, what="run id"))]


def case_row(case: TestCase) -> dict[str, Any]:
    """``case`` as a test-set file line (metadata fields at the top level; empty fields left out)."""
    row: dict[str, Any] = {"id": case.id}
    for field in ("question", "expected_answer", "answer"):
        v = getattr(case, field)
        if v is not None:
            row[field] = v
    if case.keywords is not None:
        row["keywords"] = list(case.keywords)
    for field in ("reference_contexts", "contexts", "doc_ids"):
        v = getattr(case, field)
        if v:
            row[field] = list(v)
    if case.context_labels is not None:
        row["context_labels"] = list(case.context_labels)
    for k, v in case.metadata.items():
        row.setdefault(k, v)
    return row


def _info(row: Mapping[str, Any]) -> TestSetInfo:
    return TestSetInfo.model_validate(dict(row))


async def list_test_sets(
    store: PostgresStore,
    *,
    knowledge_base: str | None = None,
    limit: int = DEFAULT_LIMIT,
    cursor: str | None = None,
) -> Page[TestSetInfo]:
    """Test sets, newest first (by creation), optionally of one knowledge base."""
    rows = await store.list_test_sets(knowledge_base=knowledge_base, limit=limit + 1, after=time_key(cursor))
    items = [_info(r) for r in rows[:limit]]
    more = len(rows) > limit
    nxt = encode_cursor([rows[limit - 1]["created_at"], rows[limit - 1]["name"]]) if more else None
    return Page[TestSetInfo](items=items, next_cursor=nxt)


async def get_test_set_info(store: PostgresStore, name: str) -> TestSetInfo:
    """The test set ``name`` without its cases.

    Raises:
        NotFoundError: no such test set.
    """
    row = await store.test_set_row(name)
    if row is None:
        raise NotFoundError(f"test set {name!r} not found")
    return _info(row)


async def load_test_set(store: PostgresStore, name: str) -> TestSet:
    """The stored test set ``name`` with its cases (what ``ragpulse replay --test-set NAME`` replays).

    Raises:
        NotFoundError: no such test set.
    """
    ts = await store.get_test_set(name)
    if ts is None:
        raise NotFoundError(f"test set {name!r} not found")
    return ts


async def create_test_set(
    store: PostgresStore, name: str, *, knowledge_base: str | None = None, description: str | None = None
) -> TestSetInfo:
    """Create an empty test set.

    Raises:
        BadRequest: invalid name.
        Conflict: the name exists.
    """
    check_name(name)
    if not await store.create_test_set_row(name, knowledge_base, description):
        raise Conflict(f"test set {name!r} exists already")
    return await get_test_set_info(store, name)


async def update_test_set(store: PostgresStore, name: str, changes: Mapping[str, str | None]) -> TestSetInfo:
    """Change ``knowledge_base`` and/or ``description`` (the keys present in ``changes``).

    Raises:
        BadRequest: a key other than those two.
        NotFoundError: no such test set.
    """
    unknown = sorted(set(changes) - {"knowledge_base", "description"})
    if unknown:
        raise BadRequest(f"cannot change {', '.join(unknown)} (only knowledge_base and description)")
    if not await store.update_test_set_row(name, dict(changes)):
        raise NotFoundError(f"test set {name!r} not found")
    return await get_test_set_info(store, name)


async def delete_test_set(store: PostgresStore, name: str) -> None:
    """Delete a test set and its cases (runs of it keep their reports).

    Raises:
        NotFoundError: no such test set.
    """
    if not await store.delete_test_set_row(name):
        raise NotFoundError(f"test set {name!r} not found")


async def knowledge_bases(store: PostgresStore) -> list[KnowledgeBase]:
    """Knowledge bases known from test sets, by name, with their test-set counts."""
    return [KnowledgeBase.model_validate(r) for r in await store.knowledge_bases()]


async def list_cases(
    store: PostgresStore, name: str, *, limit: int = DEFAULT_LIMIT, cursor: str | None = None
) -> Page[dict[str, Any]]:
    """The cases of test set ``name`` in their order (file order, added cases last), as file lines.

    Raises:
        NotFoundError: no such test set.
        BadRequest: a bad cursor.
    """
    ts = await load_test_set(store, name)
    start = 0
    if cursor is not None:
        key = decode_cursor(cursor, 1)[0]
        if not isinstance(key, int) or key < 0:
            raise BadRequest(f"invalid cursor {cursor[:40]!r}")
        start = key
    chunk = ts.cases[start : start + limit]
    nxt = encode_cursor([start + limit]) if start + limit < len(ts.cases) else None
    return Page[dict[str, Any]](items=[case_row(c) for c in chunk], next_cursor=nxt)


def _find(ts: TestSet, case_id: str) -> int | None:
    return next((i for i, c in enumerate(ts.cases) if c.id == case_id), None)


async def get_case(store: PostgresStore, name: str, case_id: str) -> dict[str, Any]:
    """One case as a file line.

    Raises:
        NotFoundError: no such test set or case.
    """
    ts = await load_test_set(store, name)
    i = _find(ts, case_id)
    if i is None:
        raise NotFoundError(f"case {case_id!r} not found in test set {name!r}")
    return case_row(ts.cases[i])


def _parse(row: Mapping[str, Any], default_id: str) -> TestCase:
    try:  # NUL and lone surrogates (a cut emoji) become U+FFFD here, as in files: stored and echoed alike
        return parse_case(clean_json(dict(row)), default_id)
    except ValueError as e:
        raise BadRequest(str(e)) from e


def _next_id(ts: TestSet) -> str:
    ids = {c.id for c in ts.cases}
    n = len(ts.cases) + 1
    while f"case-{n}" in ids:
        n += 1
    return f"case-{n}"


async def add_case(store: PostgresStore, name: str, row: Mapping[str, Any]) -> dict[str, Any]:
    """Append a case (id ``case-N`` when the row has none).

    Raises:
        NotFoundError: no such test set.
        BadRequest: a field of the wrong type.
        Conflict: the case id exists.
    """
    ts = await load_test_set(store, name)
    case = _parse(row, _next_id(ts))
    if _find(ts, case.id) is not None:
        raise Conflict(f"case {case.id!r} exists in test set {name!r}")
    await store.upsert_test_set(ts.model_copy(update={"cases": (*ts.cases, case)}))
    return case_row(case)


async def put_case(
    store: PostgresStore, name: str, case_id: str, row: Mapping[str, Any]
) -> tuple[dict[str, Any], bool]:
    """Create or replace case ``case_id`` (an id in ``row`` must match); returns ``(case, created)``.

    Raises:
        NotFoundError: no such test set.
        BadRequest: a field of the wrong type, or an id in the body that differs from ``case_id``.
    """
    ts = await load_test_set(store, name)
    body_id = row.get("id", row.get("case_id"))
    if body_id is not None and str(body_id) != case_id:
        raise BadRequest(f"the body's id {body_id!r} differs from the path's {case_id!r}")
    case = _parse({**row, "id": case_id}, case_id)
    i = _find(ts, case_id)
    cases = list(ts.cases)
    if i is None:
        cases.append(case)
    else:
        cases[i] = case
    await store.upsert_test_set(ts.model_copy(update={"cases": tuple(cases)}))
    return case_row(case), i is None


async def delete_case(store: PostgresStore, name: str, case_id: str) -> None:
    """Delete one case.

    Raises:
        NotFoundError: no such test set or case.
    """
    ts = await load_test_set(store, name)
    i = _find(ts, case_id)
    if i is None:
        raise NotFoundError(f"case {case_id!r} not found in test set {name!r}")
    await store.upsert_test_set(ts.model_copy(update={"cases": ts.cases[:i] + ts.cases[i + 1 :]}))


async def import_cases(
    store: PostgresStore, name: str, text: str, fmt: ImportFormat, *, mode: ImportMode = "append"
) -> ImportResult:
    """Bulk import ``text`` (``json`` array or object, ``jsonl`` or ``csv``) into test set ``name``.

    Good rows are stored, bad ones listed in ``rejected`` with their line and reason (the CLI's loader reads
    the same way, but stops at the first bad row). ``append`` keeps the existing cases (a row with an existing
    id replaces that case: ``updated``); ``replace`` makes the good rows the whole test set.

    Raises:
        NotFoundError: no such test set.
        BadRequest: the input as a whole is unusable (JSON that does not parse, CSV without header).
    """
    ts = await load_test_set(store, name)
    try:
        parsed = read_cases(text, fmt, label="body", collect=True)
    except TestSetError as e:
        raise BadRequest(str(e)) from e
    existing = {} if mode == "replace" else {c.id: i for i, c in enumerate(ts.cases)}
    cases = [] if mode == "replace" else list(ts.cases)
    created: list[ImportRow] = []
    updated: list[ImportRow] = []
    for line, case in parsed.cases:
        i = existing.get(case.id)
        if i is None:
            existing[case.id] = len(cases)
            cases.append(case)
            created.append(ImportRow(line=line, id=case.id))
        else:
            cases[i] = case
            updated.append(ImportRow(line=line, id=case.id))
    if created or updated or mode == "replace":
        await store.upsert_test_set(ts.model_copy(update={"cases": tuple(cases)}))
    return ImportResult(
        test_set=name,
        mode=mode,
        created=created,
        updated=updated,
        rejected=[RejectedRow(line=p.line, reason=p.reason) for p in parsed.rejected],
        case_count=len(cases),
    )
