"""Test sets and their cases, stored in PostgreSQL: list, create, edit, delete, bulk import.

Shared by the HTTP API (``/api/v1/test-sets``) and the CLI: a test set edited here is the one
``ragpulse replay --test-set NAME`` replays. A case is exchanged as the fields of a test-set file line
(``id``, ``question``, ``expected_answer``, ``keywords``, ``reference_contexts``, ``answer``, ``contexts``,
``doc_ids``, ``context_labels``, plus every metadata field at the top level), read by the same
:func:`ragpulse.runs.testset_files.parse_case` / :func:`~ragpulse.runs.testset_files.read_cases` as the CLI's loader.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from datetime import datetime
from functools import partial
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, Field

from ragpulse.errors import BadRequest, Conflict, NotFoundError
from ragpulse.jsonutil import TooDeep, check_depth
from ragpulse.model import TestCase, TestSet
from ragpulse.query import DEFAULT_LIMIT, Page, decode_cursor, encode_cursor, time_key
from ragpulse.runs.testset_files import TestSetError, parse_case, read_cases
from ragpulse.store import PostgresStore
from ragpulse.textclean import clean_json

__all__ = [
    "DEFAULT_MAX_CASES",
    "MAX_NAME_CHARS",
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
    "check_test_set_name",
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

#: Most cases a stored test set may hold (``api.max_test_set_cases``'s default): an import, add or PUT beyond
#: it answers 422 ``too_many_cases`` and writes nothing.
DEFAULT_MAX_CASES = 100_000

#: Run ids, in the CLI and the API alike (checked by :func:`check_name`); test-set names may be any Unicode text
#: (:func:`check_test_set_name`).
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
_NAME = re.compile(NAME_PATTERN)
#: Longest test-set name, characters (after NFC normalisation).
MAX_NAME_CHARS = 128

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


def check_test_set_name(name: str) -> str:
    """``name`` in Unicode NFC form when it is a valid test-set name: 1–:data:`MAX_NAME_CHARS` characters, no
    control or format character (Unicode categories ``Cc``/``Cf``: newlines, bidi overrides), no lone surrogate
    (``Cs``), no ``/`` or
    ``\\``, no leading or trailing space, and not ``.`` or ``..`` — Chinese, accented and spaced names are fine
    (``人力资源知识库``, ``FAQ Übersicht``); links encode them.

    Raises:
        InvalidName: it is not (the message says which rule; HTTP 422).
    """
    nfc = unicodedata.normalize("NFC", name)
    problem = None
    if not nfc:
        problem = "is empty"
    elif len(nfc) > MAX_NAME_CHARS:
        problem = f"is longer than {MAX_NAME_CHARS} characters"
    elif any(unicodedata.category(ch) in ("Cc", "Cf") for ch in nfc):
        problem = "contains a control or format character"
    elif any(unicodedata.category(ch) == "Cs" for ch in nfc):  # "\ud800" in JSON: not encodable text
        problem = "contains a lone surrogate (not Unicode text)"
    elif "/" in nfc or "\\" in nfc:
        problem = "contains '/' or '\\'"
    elif nfc != nfc.strip():
        problem = "starts or ends with a space"
    elif nfc in (".", ".."):
        problem = "is '.' or '..'"
    if problem is not None:
        raise InvalidName(f"invalid test set name {name[:140]!r}: it {problem}")
    return nfc


def check_name(name: str, what: str = "run id") -> str:
    """``name`` if it matches :data:`NAME_PATTERN` — the one check of run ids (CLI and API); a test-set name is
    checked by :func:`check_test_set_name` (``what`` = ``"test set name"`` does that).

    Raises:
        InvalidName: it does not (the message shows the rule and the pattern; CLI exit 2, HTTP 422).
    """
    if what == "test set name":
        return check_test_set_name(name)
    if not _NAME.fullmatch(name):
        raise InvalidName(
            f"invalid {what} {name[:140]!r}: use letters, digits, '.', '_' and '-', starting with a letter or "
            f"digit, at most 128 characters (pattern {NAME_PATTERN})"
        )
    return name


_NAME_SCHEMA = Field(json_schema_extra={"pattern": NAME_PATTERN, "maxLength": 128})
#: A test-set name in an API body (validated and NFC-normalised by :func:`check_test_set_name`).
TestSetName = Annotated[
    str, Field(json_schema_extra={"maxLength": MAX_NAME_CHARS}), AfterValidator(check_test_set_name)
]
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
        raise NotFoundError(f"test set {name[:100]!r} not found")
    return _info(row)


async def load_test_set(store: PostgresStore, name: str) -> TestSet:
    """The stored test set ``name`` with its cases (what ``ragpulse replay --test-set NAME`` replays).

    Raises:
        NotFoundError: no such test set.
    """
    ts = await store.get_test_set(name)
    if ts is None:
        raise NotFoundError(f"test set {name[:100]!r} not found")
    return ts


async def create_test_set(
    store: PostgresStore, name: str, *, knowledge_base: str | None = None, description: str | None = None
) -> TestSetInfo:
    """Create an empty test set.

    Raises:
        BadRequest: invalid name.
        Conflict: the name exists.
    """
    name = check_test_set_name(name)
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
        raise NotFoundError(f"test set {name[:100]!r} not found")
    return await get_test_set_info(store, name)


async def delete_test_set(store: PostgresStore, name: str) -> None:
    """Delete a test set and its cases (runs of it keep their reports).

    Raises:
        NotFoundError: no such test set.
    """
    if not await store.delete_test_set_row(name):
        raise NotFoundError(f"test set {name[:100]!r} not found")


async def knowledge_bases(store: PostgresStore) -> list[KnowledgeBase]:
    """Knowledge bases known from test sets, by name, with their test-set counts."""
    return [KnowledgeBase.model_validate(r) for r in await store.knowledge_bases()]


async def list_cases(
    store: PostgresStore, name: str, *, limit: int = DEFAULT_LIMIT, cursor: str | None = None
) -> Page[dict[str, Any]]:
    """The cases of test set ``name`` in their order (file order, added cases last), as file lines; one page
    read in SQL (keyset on the case's position: the cursor is the last position shown).

    Raises:
        NotFoundError: no such test set.
        BadRequest: a bad cursor.
    """
    after: int | None = None
    if cursor is not None:
        key = decode_cursor(cursor, 1)[0]
        if not isinstance(key, int) or isinstance(key, bool) or key < 0:
            raise BadRequest(f"invalid cursor {cursor[:40]!r}")
        after = key
    rows = await store.case_page(name, after=after, limit=limit + 1)
    if not rows and await store.test_set_row(name) is None:
        raise NotFoundError(f"test set {name[:100]!r} not found")
    more = len(rows) > limit
    rows = rows[:limit]
    nxt = encode_cursor([rows[-1][0]]) if more else None
    return Page[dict[str, Any]](items=[case_row(c) for _, c in rows], next_cursor=nxt)


async def get_case(store: PostgresStore, name: str, case_id: str) -> dict[str, Any]:
    """One case as a file line.

    Raises:
        NotFoundError: no such test set or case.
    """
    case = await store.get_case(name, case_id)
    if case is None:
        if await store.test_set_row(name) is None:
            raise NotFoundError(f"test set {name[:100]!r} not found")
        raise NotFoundError(f"case {case_id[:100]!r} not found in test set {name[:100]!r}")
    return case_row(case)


def _parse(row: Mapping[str, Any], default_id: str) -> TestCase:
    try:  # NUL and lone surrogates (a cut emoji) become U+FFFD here, as in files: stored and echoed alike
        return parse_case(clean_json(check_depth(dict(row))), default_id)
    except TooDeep as e:
        raise BadRequest(str(e), code=e.code) from e
    except ValueError as e:
        raise BadRequest(str(e)) from e


def _too_many(name: str, count: int, max_cases: int) -> BadRequest:
    return BadRequest(
        f"too_many_cases: test set {name!r} would hold {count:,} cases, more than the limit of {max_cases:,} "
        "(RAGPULSE_API_MAX_TEST_SET_CASES)",
        code="too_many_cases",
    )


#: The placeholder id of a case added without one (replaced by the first free ``case-N``).
_AUTO_ID = "case-0"


async def add_case(
    store: PostgresStore, name: str, row: Mapping[str, Any], *, max_cases: int = DEFAULT_MAX_CASES
) -> dict[str, Any]:
    """Append a case (id ``case-N``, the first free N from the case count + 1, when the row has none). One
    short transaction that writes only this case: concurrent adds are all kept.

    Raises:
        NotFoundError: no such test set.
        BadRequest: a field of the wrong type, a bad id (:func:`ragpulse.model.id_problem`), or the set holds
            ``max_cases`` already (``code`` ``too_many_cases``).
        Conflict: the case id exists.
    """
    auto = not _has_id(row)
    case = _parse(row, _AUTO_ID)
    outcome, cid = await store.insert_case(name, case, max_cases=max_cases, auto_id=auto)
    if outcome == "no_set":
        raise NotFoundError(f"test set {name[:100]!r} not found")
    if outcome == "exists":
        raise Conflict(f"case {cid!r} exists in test set {name!r}")
    if outcome == "full":
        raise _too_many(name, max_cases + 1, max_cases)
    return case_row(case.model_copy(update={"id": cid}))


def _has_id(row: Mapping[str, Any]) -> bool:
    v = row.get("id", row.get("case_id"))
    return v is not None and str(v).strip() != ""


async def put_case(
    store: PostgresStore,
    name: str,
    case_id: str,
    row: Mapping[str, Any],
    *,
    max_cases: int = DEFAULT_MAX_CASES,
) -> tuple[dict[str, Any], bool]:
    """Create or replace case ``case_id`` (an id in ``row`` must match); returns ``(case, created)``.

    Raises:
        NotFoundError: no such test set.
        BadRequest: a field of the wrong type, a bad id, an id in the body that differs from ``case_id``, or a
            new case in a full set (``too_many_cases``).
    """
    body_id = row.get("id", row.get("case_id"))
    if body_id is not None and str(body_id) != case_id:
        raise BadRequest(f"the body's id {body_id!r} differs from the path's {case_id!r}")
    case = _parse({**row, "id": case_id}, case_id)
    outcome = await store.put_case(name, case, max_cases=max_cases)
    if outcome == "no_set":
        raise NotFoundError(f"test set {name[:100]!r} not found")
    if outcome == "full":
        raise _too_many(name, max_cases + 1, max_cases)
    return case_row(case), outcome == "created"


async def delete_case(store: PostgresStore, name: str, case_id: str) -> None:
    """Delete one case (any stored id, also one that :func:`ragpulse.model.id_problem` would refuse today).

    Raises:
        NotFoundError: no such test set or case.
    """
    outcome = await store.delete_case(name, case_id)
    if outcome == "no_set":
        raise NotFoundError(f"test set {name[:100]!r} not found")
    if outcome == "no_case":
        raise NotFoundError(f"case {case_id[:100]!r} not found in test set {name[:100]!r}")


async def import_cases(
    store: PostgresStore,
    name: str,
    text: str,
    fmt: ImportFormat,
    *,
    mode: ImportMode = "append",
    max_cases: int = DEFAULT_MAX_CASES,
) -> ImportResult:
    """Bulk import ``text`` (``json`` array or object, ``jsonl`` or ``csv``) into test set ``name``.

    Good rows are stored, bad ones listed in ``rejected`` with their line and reason (the CLI's loader reads
    the same way, but stops at the first bad row). ``append`` keeps the existing cases (a row with an existing
    id replaces that case: ``updated``); ``replace`` makes the good rows the whole test set. One transaction
    that writes only the imported rows (and, for ``replace``, deletes the others).

    Raises:
        NotFoundError: no such test set.
        BadRequest: the input as a whole is unusable (JSON that does not parse, CSV without header), or the set
            would hold more than ``max_cases`` cases (``code`` ``too_many_cases``; nothing is written).
    """
    if await store.test_set_row(name) is None:
        raise NotFoundError(f"test set {name[:100]!r} not found")
    try:
        parsed = read_cases(text, fmt, label="body", collect=True)
    except TestSetError as e:
        raise BadRequest(str(e), code=getattr(e, "code", None)) from e
    done = await store.import_cases(
        name, [c for _, c in parsed.cases], replace=mode == "replace", max_cases=max_cases
    )
    if done.outcome == "no_set":
        raise NotFoundError(f"test set {name[:100]!r} not found")
    if done.outcome == "full":
        raise _too_many(name, done.case_count, max_cases)
    created: list[ImportRow] = []
    updated: list[ImportRow] = []
    seen: set[str] = set()
    for line, case in parsed.cases:  # the first row of an id created it, later rows of it updated it
        if case.id in done.created and case.id not in seen:
            created.append(ImportRow(line=line, id=case.id))
        else:
            updated.append(ImportRow(line=line, id=case.id))
        seen.add(case.id)
    return ImportResult(
        test_set=name,
        mode=mode,
        created=created,
        updated=updated,
        rejected=[RejectedRow(line=p.line, reason=p.reason) for p in parsed.rejected],
        case_count=done.case_count,
    )
