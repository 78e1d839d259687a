"""Load test sets from JSON, JSONL or CSV files.

Formats
-------
- **JSONL**: one case (a JSON object) per line; blank lines are ignored. The test set is named after the
  file (its name without the extension).
- **JSON**: either a list of cases (named after the file) or an object
  ``{"name": …, "knowledge_base": …, "description": …, "cases": [...]}``.
- **CSV**: a header row, then one case per row. A cell holding a JSON array (``["a", "b"]``) is parsed;
  otherwise ``keywords`` and ``doc_ids`` are split on commas, and ``contexts`` / ``reference_contexts`` are one
  context each. Empty cells count as missing.

Fields and aliases (first present wins)
---------------------------------------
``id`` (``case_id``; generated as ``line-N`` from the line/row number when absent), ``question`` (``query``,
``user_input``), expected answer (``expected_answer``, ``expectedAnswer``, ``ground_truth``,
``reference_answer``), ``keywords``, ``reference_contexts``, recorded ``answer`` (``response``), contexts
(``contexts``, ``retrieved_contexts``), doc ids (``doc_ids``, ``retrievedDocIds``), ``context_labels``.
A context may be a string or an object with ``content``/``text`` (and ``id``). Every other field is kept in
the case's ``metadata`` (``app`` and ``scenario`` there route the case's trace).

Errors
------
Text is read leniently (:mod:`ragpulse.textclean`): invalid UTF-8 bytes and lone surrogates (``"\\ud83d"``)
become U+FFFD and NUL characters are removed. Each case remembers where it came from (``origin``,
``file:line``), so a case that still cannot be stored is reported with its line.

:class:`TestSetError` (a :class:`~ragpulse.errors.ConfigError`) names the file and line (or row) of every
problem: invalid JSON, a row that is not an object, a field of the wrong type, a duplicate case id, no cases.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ragpulse.errors import ConfigError
from ragpulse.model import TestCase, TestSet
from ragpulse.textclean import clean_json

__all__ = ["FIELD_ALIASES", "TestSetError", "load_test_set", "parse_case"]


class TestSetError(ConfigError):
    """A test-set file cannot be read; the message names the file and line/row."""

    __test__ = False


#: Canonical field → accepted input names, in order of preference.
FIELD_ALIASES: dict[str, tuple[str, ...]] = {
    "id": ("id", "case_id"),
    "question": ("question", "query", "user_input"),
    "expected_answer": ("expected_answer", "expectedAnswer", "ground_truth", "reference_answer"),
    "keywords": ("keywords",),
    "reference_contexts": ("reference_contexts",),
    "answer": ("answer", "response"),
    "contexts": ("contexts", "retrieved_contexts"),
    "doc_ids": ("doc_ids", "retrievedDocIds"),
    "context_labels": ("context_labels",),
}
_ALL_ALIASES = frozenset(a for names in FIELD_ALIASES.values() for a in names)
_KEYWORD_SPLIT = re.compile(r"[,，;；、\n]")
_LIST_FIELDS = ("keywords", "reference_contexts", "contexts", "doc_ids", "context_labels")


class _RowError(ValueError):
    pass


def _pick(row: Mapping[str, Any], field: str) -> Any:
    for name in FIELD_ALIASES[field]:
        if name in row and row[name] is not None:
            return row[name]
    return None


def _text(field: str, v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, str | int | float):
        raise _RowError(f"{field} must be a string, got {type(v).__name__}")
    return str(v)


def _contexts(field: str, v: Any) -> tuple[list[str], list[str | None]]:
    """Contexts as text plus the ids found in object-shaped contexts."""
    if v is None:
        return [], []
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list):
        raise _RowError(f"{field} must be a list of strings, got {type(v).__name__}")
    texts: list[str] = []
    ids: list[str | None] = []
    for i, c in enumerate(v):
        if isinstance(c, str):
            texts.append(c)
            ids.append(None)
        elif isinstance(c, Mapping) and isinstance(c.get("content", c.get("text")), str):
            texts.append(c.get("content", c.get("text")))
            cid = c.get("id", c.get("doc_id"))
            ids.append(None if cid is None else str(cid))
        else:
            raise _RowError(f"{field}[{i}] must be a string or an object with 'content'")
    return texts, ids


def _str_list(field: str, v: Any) -> list[str | None]:
    if v is None:
        return []
    if isinstance(v, str):
        v = [p.strip() for p in v.split(",") if p.strip()]
    if not isinstance(v, list):
        raise _RowError(f"{field} must be a list, got {type(v).__name__}")
    out: list[str | None] = []
    for i, x in enumerate(v):
        if x is None:
            out.append(None)
        elif isinstance(x, str | int) and not isinstance(x, bool):
            out.append(str(x))
        else:
            raise _RowError(f"{field}[{i}] must be a string, got {type(x).__name__}")
    return out


def _labels(v: Any) -> tuple[int, ...] | None:
    if v is None:
        return None
    if not isinstance(v, list):
        raise _RowError(f"context_labels must be a list of 0/1, got {type(v).__name__}")
    out = []
    for i, x in enumerate(v):
        if isinstance(x, bool) or x in (0, 1):
            out.append(int(x))
        else:
            raise _RowError(f"context_labels[{i}] must be 0 or 1, got {x!r}")
    return tuple(out)


def parse_case(row: Mapping[str, Any], default_id: str) -> TestCase:
    """Build a :class:`TestCase` from one input row (aliases resolved, other fields → ``metadata``).

    Raises:
        ValueError: a field has the wrong type (the message names the field).
    """
    if not isinstance(row, Mapping):
        raise _RowError(f"a case must be a JSON object, got {type(row).__name__}")
    kw_raw = _pick(row, "keywords")
    keywords: tuple[str, ...] | None = None
    if kw_raw is not None:
        if isinstance(kw_raw, str):
            kws = _KEYWORD_SPLIT.split(kw_raw)
        elif isinstance(kw_raw, list):
            kws = [str(k) for k in _str_list("keywords", kw_raw) if k is not None]
        else:
            raise _RowError(
                f"keywords must be a list or a comma-separated string, got {type(kw_raw).__name__}"
            )
        keywords = tuple(k.strip() for k in kws if k.strip()) or None
    contexts, ctx_ids = _contexts("contexts", _pick(row, "contexts"))
    ref_contexts, _ = _contexts("reference_contexts", _pick(row, "reference_contexts"))
    doc_ids = _str_list("doc_ids", _pick(row, "doc_ids"))
    if not doc_ids and any(i is not None for i in ctx_ids):
        doc_ids = ctx_ids
    case_id = _text("id", _pick(row, "id"))
    metadata = {k: v for k, v in row.items() if k not in _ALL_ALIASES}
    for key in ("app", "scenario"):
        if key in metadata and metadata[key] is not None and not isinstance(metadata[key], str):
            raise _RowError(f"{key} must be a string")
    return TestCase(
        id=case_id.strip() if case_id and case_id.strip() else default_id,
        question=_text("question", _pick(row, "question")),
        expected_answer=_text("expected_answer", _pick(row, "expected_answer")),
        keywords=keywords,
        reference_contexts=tuple(ref_contexts),
        answer=_text("answer", _pick(row, "answer")),
        contexts=tuple(contexts),
        doc_ids=tuple(doc_ids),
        context_labels=_labels(_pick(row, "context_labels")),
        metadata=metadata,
    )


def _build(path: Path, rows: Iterable[tuple[int, Any]], unit: str, *, name: str, **extra: Any) -> TestSet:
    cases: list[TestCase] = []
    seen: dict[str, int] = {}
    for n, row in rows:
        try:
            case = parse_case(clean_json(row), f"line-{n}").model_copy(update={"origin": f"{path}:{n}"})
        except ValueError as e:
            raise TestSetError(f"{path}:{n}: {unit} {n}: {e}") from e
        if case.id in seen:
            raise TestSetError(f"{path}:{n}: duplicate case id {case.id!r} (first at {unit} {seen[case.id]})")
        seen[case.id] = n
        cases.append(case)
    if not cases:
        raise TestSetError(f"{path}: no test cases")
    return TestSet(name=name, cases=tuple(cases), **extra)


def _jsonl_rows(path: Path, text: str) -> Iterable[tuple[int, Any]]:
    # Only "\n" ends a line: str.splitlines() would also split at U+2028, U+2029, U+0085 …, which JSON
    # allows raw inside strings (json.dumps(..., ensure_ascii=False) writes them so).
    for n, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            yield n, json.loads(line)
        except json.JSONDecodeError as e:
            raise TestSetError(f"{path}:{n}: line {n} is not valid JSON: {e.msg} (column {e.colno})") from e
        except RecursionError as e:
            raise TestSetError(f"{path}:{n}: line {n} is not valid JSON: nested too deeply") from e


def _csv_cell(field: str, v: str | None) -> Any:
    if v is None or not v.strip():
        return None
    s = v.strip()
    if field in _LIST_FIELDS and s.startswith("["):
        try:
            return json.loads(s)
        except json.JSONDecodeError as e:
            raise _RowError(f"{field} looks like a JSON array but is not valid JSON: {e.msg}") from e
    return v


def _csv_rows(path: Path, text: str) -> Iterable[tuple[int, Any]]:
    # newline="" lets quoted cells keep their line breaks (RFC 4180); strict rejects broken quoting.
    reader = csv.DictReader(io.StringIO(text, newline=""), strict=True)
    try:
        header = reader.fieldnames
    except csv.Error as e:
        raise TestSetError(f"{path}:{reader.line_num}: not valid CSV: {e}") from e
    if not header:
        raise TestSetError(f"{path}: CSV file has no header row")
    rows = iter(reader)
    canonical = {a: f for f, names in FIELD_ALIASES.items() for a in names}
    while True:
        try:
            row = next(rows)
        except StopIteration:
            break
        except csv.Error as e:
            raise TestSetError(f"{path}:{reader.line_num}: not valid CSV: {e}") from e
        n = reader.line_num
        extra = row.get(None)  # DictReader's restkey: cells beyond the header
        if extra:
            cells = len(header) + len(extra)
            raise TestSetError(
                f"{path}:{n}: row {n}: {cells} cells but the header has {len(header)} (unquoted comma?)"
            )
        try:
            yield n, {k: _csv_cell(canonical.get(k, k), v) for k, v in row.items() if k is not None}
        except _RowError as e:
            raise TestSetError(f"{path}:{n}: row {n}: {e}") from e


def load_test_set(path: str | Path, name: str | None = None) -> TestSet:
    """Read a test set from ``path`` (``.jsonl``, ``.json`` or ``.csv``; other suffixes are read as JSONL).

    Args:
        path: the file.
        name: overrides the test set's name (default: the JSON object's ``name``, else the file stem).

    Raises:
        TestSetError: the file is missing, unreadable or holds a bad row (message names file and line).
    """
    p = Path(path)
    try:
        # Lenient (ragpulse.textclean): invalid UTF-8 bytes become U+FFFD, lone surrogates U+FFFD and NUL is
        # removed, so one bad character never costs a case. No newline translation: CSV cells keep "\r\n".
        text = p.read_bytes().decode("utf-8-sig", errors="replace")
    except FileNotFoundError as e:
        raise TestSetError(f"{p}: test set file not found") from e
    except OSError as e:
        raise TestSetError(f"{p}: cannot read test set: {e}") from e
    suffix = p.suffix.lower()
    if suffix == ".csv":
        return _build(p, _csv_rows(p, text), "row", name=name or p.stem)
    if suffix == ".json":
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise TestSetError(f"{p}:{e.lineno}: not valid JSON: {e.msg} (column {e.colno})") from e
        except RecursionError as e:
            raise TestSetError(f"{p}:1: not valid JSON: nested too deeply") from e
        if isinstance(doc, list):
            return _build(p, enumerate(doc, start=1), "case", name=name or p.stem)
        if isinstance(doc, dict) and isinstance(doc.get("cases"), list):
            return _build(
                p,
                enumerate(doc["cases"], start=1),
                "case",
                name=name or str(doc.get("name") or p.stem),
                knowledge_base=doc.get("knowledge_base"),
                description=doc.get("description"),
            )
        raise TestSetError(f"{p}: a JSON test set is a list of cases or an object with a 'cases' list")
    return _build(p, _jsonl_rows(p, text), "line", name=name or p.stem)
