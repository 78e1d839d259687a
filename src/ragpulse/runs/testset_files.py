"""Load test sets from JSON, JSONL or CSV files.

Formats
-------
- **JSONL**: one case (a JSON object) per line; blank lines are ignored. The test set is named after the
  file (its name without the extension).
- **JSON**: either a list of cases (named after the file) or an object
  ``{"name": …, "knowledge_base": …, "description": …, "cases": [...]}``.
- **CSV**: a header row, then one case per row. A cell holding a JSON array (``["a", "b"]``) is parsed;
  otherwise ``keywords`` and ``doc_ids`` are split on commas, and ``contexts`` / ``reference_contexts`` are one
  context each. Empty cells count as missing. The delimiter is ``csv_delimiter`` when given, else the one of
  ``,`` ``;`` tab ``|`` that splits the header row into the most known field names (below), ``,`` on a tie; a
  header with no known field name is an error (the wrong delimiter reads ``question;answer`` as one column).
  An empty (or blank) file, or a header row without rows, has "no test cases", as an empty JSONL or JSON file.

Encoding
--------
UTF-8; a byte-order mark selects UTF-8, UTF-16 or UTF-32 instead, and ``encoding`` (``replay --encoding``)
overrides both. Any other bytes are an error that says the file must be UTF-8 and names the line.
JSON numbers must be finite: ``NaN``/``Infinity`` (accepted by Python's ``json``, not by the JSON standard) are
rejected as on the Kafka path instead of becoming ``null`` in PostgreSQL's ``jsonb``.

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
Lone surrogates (``"\\ud83d"``, half an emoji) become U+FFFD and NUL characters are removed
(:mod:`ragpulse.textclean`); a file that is not UTF-8 is an error naming the line (below). Each case remembers where it came from (``origin``,
``file:line``), so a case that still cannot be stored is reported with its line.

:class:`TestSetError` (a :class:`~ragpulse.errors.ConfigError`) names the file and line (or row) of every
problem: invalid JSON, a row that is not an object, a field of the wrong type, a case without a question
(missing or blank), a duplicate case id, no cases,
a file that is not UTF-8, a CSV quote left open (reported on the line where the quoted cell starts).
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import re
import tempfile
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragpulse.errors import ConfigError
from ragpulse.jsonutil import TooDeep, check_depth, strict_loads
from ragpulse.model import TestCase, TestSet, cases_hash, id_problem
from ragpulse.protocols import CaseSource
from ragpulse.textclean import clean_json

__all__ = [
    "CSV_DELIMITERS",
    "FIELD_ALIASES",
    "ParsedCases",
    "RowProblem",
    "SpooledTestSet",
    "StreamedTestSet",
    "TestSetError",
    "decode_text",
    "load_test_set",
    "open_test_set",
    "parse_case",
    "read_cases",
    "require_question",
    "spool_test_set",
]


class TestSetError(ConfigError):
    """A test-set file cannot be read; the message names the file and line/row. ``code``: a machine reason
    (``too_deep``) or ``None``."""

    __test__ = False

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


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
#: CSV delimiters tried on the header row, in order of preference on a tie.
CSV_DELIMITERS = (",", ";", "\t", "|")

#: Largest CSV cell, characters: the csv module's default (131,072) would refuse a long answer or a whole document
#: in ``contexts`` that the same case as a JSONL line carries fine; 2³¹ − 1 is the largest limit every platform's
#: C ``long`` takes. Raised once, process-wide (the csv module has no per-reader limit).
CSV_FIELD_LIMIT = 2**31 - 1
csv.field_size_limit(max(csv.field_size_limit(), CSV_FIELD_LIMIT))
_DELIMITER_NAMES = {",": "comma", ";": "semicolon", "\t": "tab", "|": "'|'"}
# UTF-32 first: its little-endian BOM starts with UTF-16's.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


class _RowError(ValueError):
    pass


class _Reread(Exception):
    """A streamed file needs the whole-file reader to report its problem."""


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


def require_question(question: str | None) -> str:
    """``question`` when it is there and not blank: the rule every test case follows (files, portal, API).

    Raises:
        ValueError: missing or blank (the message names the field and its aliases).
    """
    if question is None or not question.strip():
        raise _RowError(
            f"question is required ({', '.join(FIELD_ALIASES['question'])}): a case without one cannot be judged"
        )
    return question


def parse_case(row: Mapping[str, Any], default_id: str) -> TestCase:
    """Build a :class:`TestCase` from one input row (aliases resolved, other fields → ``metadata``).

    Raises:
        ValueError: a field has the wrong type, or the question is missing or blank (the message names the
            field) — the one rule of test cases for files, the portal and the API; ``TooDeep`` for a row
            nested deeper than :data:`~ragpulse.jsonutil.MAX_JSON_DEPTH`.
    """
    if not isinstance(row, Mapping):
        raise _RowError(f"a case must be a JSON object, got {type(row).__name__}")
    check_depth(dict(row))  # TooDeep ("too_deep: …"), a ValueError as the other row problems
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
    question = require_question(_text("question", _pick(row, "question")))
    metadata = {k: v for k, v in row.items() if k not in _ALL_ALIASES}
    for key in ("app", "scenario"):
        if key in metadata and metadata[key] is not None and not isinstance(metadata[key], str):
            raise _RowError(f"{key} must be a string")
    cid = case_id.strip() if case_id and case_id.strip() else default_id
    problem = id_problem(cid)
    if problem is not None:  # ids are data, but never a control character or a '.'/'..' path segment
        raise _RowError(f"id {cid[:100]!r} {problem}")
    return TestCase(
        id=cid,
        question=question,
        expected_answer=_text("expected_answer", _pick(row, "expected_answer")),
        keywords=keywords,
        reference_contexts=tuple(ref_contexts),
        answer=_text("answer", _pick(row, "answer")),
        contexts=tuple(contexts),
        doc_ids=tuple(doc_ids),
        context_labels=_labels(_pick(row, "context_labels")),
        metadata=metadata,
    )


@dataclass(frozen=True)
class RowProblem:
    """A rejected input row: ``line`` (physical line for JSONL and CSV, header = line 1; 1-based element index
    for a JSON array), ``reason`` (one line, no position) and ``message`` (the text the strict loader puts after
    ``<file>:<line>: ``)."""

    line: int
    reason: str
    message: str


@dataclass(frozen=True)
class ParsedCases:
    """What :func:`read_cases` read: ``cases`` as ``(line, case)`` in input order, ``rejected`` rows (collect
    mode only) and, for a JSON object document, its ``name``/``knowledge_base``/``description``."""

    cases: list[tuple[int, TestCase]]
    rejected: list[RowProblem]
    name: str | None = None
    knowledge_base: str | None = None
    description: str | None = None


class _Collector:
    """Strict (raise on the first problem, naming ``label`` and the line) or collect mode."""

    def __init__(self, label: str, collect: bool) -> None:
        self.label = label
        self.collect = collect
        self.rejected: list[RowProblem] = []

    def problem(self, line: int, reason: str, message: str) -> None:
        if not self.collect:
            raise TestSetError(f"{self.label}:{line}: {message}")
        self.rejected.append(RowProblem(line, reason, message))


def _cases(rows: Iterable[tuple[int, Any]], unit: str, col: _Collector) -> list[tuple[int, TestCase]]:
    return list(_iter_cases(rows, unit, col))


def _iter_cases(
    rows: Iterable[tuple[int, Any]], unit: str, col: _Collector
) -> Iterator[tuple[int, TestCase]]:
    seen: dict[str, int] = {}
    for n, row in rows:
        if isinstance(row, _RowError):
            col.problem(n, str(row), f"{unit} {n}: {row}")
            continue
        try:
            case = parse_case(clean_json(row), f"line-{n}").model_copy(update={"origin": f"{col.label}:{n}"})
        except ValueError as e:
            col.problem(n, str(e), f"{unit} {n}: {e}")
            continue
        if case.id in seen:
            why = f"duplicate case id {case.id!r} (first at {unit} {seen[case.id]})"
            col.problem(n, why, why)
            continue
        seen[case.id] = n
        yield n, case


def _lines(text: str) -> Iterator[str]:
    """``text.split("\n")`` one line at a time (a 200 MB file is not copied into a list of lines first)."""
    start = 0
    while True:
        end = text.find("\n", start)
        if end < 0:
            yield text[start:]
            return
        yield text[start:end]
        start = end + 1


def _jsonl_rows(lines: Iterable[str], col: _Collector) -> Iterable[tuple[int, Any]]:
    # Only "\n" ends a line: str.splitlines() would also split at U+2028, U+2029, U+0085 …, which JSON
    # allows raw inside strings (json.dumps(..., ensure_ascii=False) writes them so).
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield n, strict_loads(line)
        except json.JSONDecodeError as e:
            why = f"not valid JSON: {e.msg} (column {e.colno})"
            col.problem(n, why, f"line {n} is {why}")
        except TooDeep as e:
            col.problem(n, str(e), f"line {n}: {e}")
        except ValueError as e:  # NaN / Infinity
            col.problem(n, f"not valid JSON: {e}", f"line {n} is not valid JSON: {e}")


def _csv_cell(field: str, v: str | None) -> Any:
    if v is None or not v.strip():
        return None
    s = v.strip()
    if field in _LIST_FIELDS and s.startswith("["):
        try:
            return strict_loads(s)
        except json.JSONDecodeError as e:
            raise _RowError(f"{field} looks like a JSON array but is not valid JSON: {e.msg}") from e
        except TooDeep as e:
            raise _RowError(f"{field}: {e}") from e
        except ValueError as e:  # NaN / Infinity
            raise _RowError(f"{field} looks like a JSON array but is not valid JSON: {e}") from e
    return v


def _header_delimiter(label: str, text: str, given: str | None) -> str:
    """The delimiter: ``given``, else the one of :data:`CSV_DELIMITERS` whose split of the header row holds
    the most known field names (the first on a tie).

    Raises:
        TestSetError: the header holds no known field name with the chosen delimiter.
    """
    first = text.split("\n", 1)[0].rstrip("\r")
    candidates = (given,) if given else CSV_DELIMITERS

    def known(delimiter: str) -> int:
        cells = next(csv.reader([first], delimiter=delimiter), [])
        return sum(1 for c in cells if c.strip() in _ALL_ALIASES)

    best = max(candidates, key=known)  # max keeps the first of equal counts
    if known(best) == 0:
        hint = (
            f"with --csv-delimiter {given!r}"
            if given
            else f"with any delimiter of {', '.join(_DELIMITER_NAMES[d] for d in CSV_DELIMITERS)}"
        )
        raise TestSetError(
            f"{label}:1: no known column in the CSV header {first[:120]!r} {hint}; expected at least one of "
            f"{', '.join(sorted(_ALL_ALIASES))} (set the delimiter with --csv-delimiter)"
        )
    return best


def _csv_rows(
    text: str, delimiter: str | None, col: _Collector, source: Iterable[str] | None = None
) -> Iterable[tuple[int, Any]]:
    """Rows of a CSV document: ``text`` (the whole document, or — when ``source`` gives the document's lines
    read with ``newline=""`` — its first line only, and the file is read again whole for a broken quote)."""
    if not text.strip():  # an empty (or blank) document has no rows: "no test cases", as JSONL and JSON
        if source is not None:  # streamed: only the first line is known; the whole-file reader decides
            raise _Reread("the first line is blank")
        return
    # newline="" lets quoted cells keep their line breaks (RFC 4180); strict rejects broken quoting.
    delim = _header_delimiter(col.label, text, delimiter)
    reader = csv.DictReader(
        io.StringIO(text, newline="") if source is None else source, delimiter=delim, strict=True
    )
    try:
        header = reader.fieldnames
    except csv.Error as e:
        raise TestSetError(f"{col.label}:{reader.line_num}: not valid CSV: {e}") from e
    if not header:
        raise TestSetError(f"{col.label}: CSV file has no header row")
    rows = iter(reader)
    canonical = {a: f for f, names in FIELD_ALIASES.items() for a in names}
    while True:
        row_start = reader.line_num + 1  # the physical line the next row starts on
        try:
            row = next(rows)
        except StopIteration:
            break
        except csv.Error as e:  # broken quoting: the rest cannot be split into rows reliably, so stop here
            if "unexpected end of data" in str(e):  # the reader ran to the end looking for the closing quote
                if source is not None:  # streamed: the whole-file reader finds the line
                    raise _Reread from e
                lines = text.split("\n")
                while row_start < len(lines) and not lines[row_start - 1].strip():  # skipped blank lines
                    row_start += 1
                why = (
                    f"not valid CSV: unexpected end of data: the quoted cell of the row starting on line "
                    f"{row_start} is never closed"
                )
                col.problem(row_start, why, why)
                return
            line = max(reader.line_num, row_start)  # the reader does not count a line it failed inside
            col.problem(line, f"not valid CSV: {e}", f"not valid CSV: {e}")
            return
        n = reader.line_num
        extra = row.get(None)  # DictReader's restkey: cells beyond the header
        if extra:
            cells = len(header) + len(extra)
            yield (
                n,
                _RowError(
                    f"{cells} cells but the header has {len(header)} "
                    f"(unquoted {_DELIMITER_NAMES.get(delim, repr(delim))}?)"
                ),
            )
            continue
        try:
            yield n, {k: _csv_cell(canonical.get(k, k), v) for k, v in row.items() if k is not None}
        except _RowError as e:
            yield n, e


def read_cases(
    text: str, fmt: str, *, label: str = "<input>", collect: bool = False, csv_delimiter: str | None = None
) -> ParsedCases:
    """Parse test cases from ``text`` in ``fmt`` (``jsonl``, ``json`` or ``csv``; see the module docstring).

    The one reader of test-set input: the CLI's :func:`load_test_set` (strict) and the portal's import
    (``collect=True``) share it.

    Args:
        text: the decoded input.
        fmt: ``jsonl``, ``json`` or ``csv``.
        label: names the input in error messages (the file path).
        collect: keep going after a bad row and list it in ``rejected`` instead of raising.
        csv_delimiter: the CSV delimiter (default: detected from the header row).

    Raises:
        TestSetError: strict mode: the first bad row (message ``<label>:<line>: …``); both modes: the input as a
            whole is unusable (a JSON document that does not parse or is neither a list nor an object with
            ``cases``, a CSV header without a known column).
    """
    col = _Collector(label, collect)
    if fmt == "csv":
        return ParsedCases(_cases(_csv_rows(text, csv_delimiter, col), "row", col), col.rejected)
    if fmt == "json":
        try:
            doc = strict_loads(text)
        except json.JSONDecodeError as e:
            raise TestSetError(f"{label}:{e.lineno}: not valid JSON: {e.msg} (column {e.colno})") from e
        except TooDeep as e:
            raise TestSetError(f"{label}:1: {e}", code=e.code) from e
        except ValueError as e:  # NaN / Infinity
            raise TestSetError(f"{label}: not valid JSON: {e}") from e
        if isinstance(doc, list):
            return ParsedCases(_cases(enumerate(doc, start=1), "case", col), col.rejected)
        if isinstance(doc, dict) and isinstance(doc.get("cases"), list):
            kb, desc = doc.get("knowledge_base"), doc.get("description")
            return ParsedCases(
                _cases(enumerate(doc["cases"], start=1), "case", col),
                col.rejected,
                name=str(doc["name"]) if doc.get("name") else None,
                knowledge_base=kb if isinstance(kb, str) else None,
                description=desc if isinstance(desc, str) else None,
            )
        raise TestSetError(f"{label}: a JSON test set is a list of cases or an object with a 'cases' list")
    if fmt == "jsonl":
        return ParsedCases(_cases(_jsonl_rows(_lines(text), col), "line", col), col.rejected)
    raise ValueError(f"unknown test-set format {fmt!r}")


def decode_text(path: Path, data: bytes, encoding: str | None = None) -> str:
    """Decode a test-set file: ``encoding`` when given, else by its byte-order mark, else UTF-8 (strict).

    Raises:
        TestSetError: unknown ``encoding``, or bytes that do not decode (the message says the file must be
            UTF-8, names the line, and suggests ``--encoding``).
    """
    if encoding:
        try:
            codecs.lookup(encoding)
        except LookupError as e:
            raise TestSetError(f"{path}: unknown encoding {encoding!r} (--encoding)") from e
        chosen = encoding
    else:
        chosen = next((enc for bom, enc in _BOMS if data.startswith(bom)), "utf-8")
    try:
        return data.decode(chosen)
    except UnicodeDecodeError as e:
        raise _decode_error(path, data, e, encoding) from e


def _decode_error(
    path: Path, data: bytes, e: UnicodeDecodeError, encoding: str | None, first_line: int = 1
) -> TestSetError:
    """The error for bytes of ``data`` (the file from line ``first_line`` on) that do not decode."""
    line = data.count(b"\n", 0, e.start) + first_line
    column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
    byte = data[e.start : e.start + 1].hex().upper()
    if encoding:
        return TestSetError(
            f"{path}:{line}: not valid {encoding}: byte 0x{byte} at line {line}, column {column} ({e.reason})"
        )
    return TestSetError(
        f"{path}:{line}: the file must be UTF-8 (or start with a byte-order mark): byte 0x{byte} at line "
        f"{line}, column {column} is not UTF-8; convert the file or pass --encoding (e.g. gbk, utf-16)"
    )


def _looks_utf16_without_bom(data: bytes) -> bool:
    head = data[:4096]
    return len(head) >= 4 and head.count(0) * 4 >= len(head)


def load_test_set(
    path: str | Path,
    name: str | None = None,
    *,
    encoding: str | None = None,
    csv_delimiter: str | None = None,
) -> TestSet:
    """Read a test set from ``path`` (``.jsonl``, ``.json`` or ``.csv``; other suffixes are read as JSONL).

    Args:
        path: the file.
        name: overrides the test set's name (default: the JSON object's ``name``, else the file stem).
        encoding: the file's text encoding (default: UTF-8, or what its byte-order mark says).
        csv_delimiter: the CSV delimiter, one character (``tab`` and ``\\t`` mean a tab; default: detected from
            the header row, see the module docstring).

    Raises:
        TestSetError: the file is missing, unreadable, not UTF-8 or holds a bad row (message names file and line).
    """
    p = Path(path)
    csv_delimiter = {"tab": "\t", "\\t": "\t"}.get(csv_delimiter or "", csv_delimiter) or None
    if csv_delimiter is not None and len(csv_delimiter) != 1:
        raise TestSetError(f"--csv-delimiter must be one character, got {csv_delimiter!r}")
    try:
        data = p.read_bytes()  # no newline translation: CSV cells keep "\r\n"
    except FileNotFoundError as e:
        raise TestSetError(f"{p}: test set file not found") from e
    except OSError as e:
        raise TestSetError(f"{p}: cannot read test set: {e}") from e
    if not encoding and not any(data.startswith(bom) for bom, _ in _BOMS) and _looks_utf16_without_bom(data):
        raise TestSetError(
            f"{p}:1: the file must be UTF-8: it looks like UTF-16 or UTF-32 without a byte-order mark "
            "(many NUL bytes); convert it or pass --encoding (e.g. utf-16-le)"
        )
    text = decode_text(p, data, encoding)
    del data  # the bytes are not needed any more (a large file would be held twice)
    suffix = p.suffix.lower()
    fmt = "csv" if suffix == ".csv" else "json" if suffix == ".json" else "jsonl"
    parsed = read_cases(text, fmt, label=str(p), csv_delimiter=csv_delimiter)
    if not parsed.cases:
        raise TestSetError(f"{p}: no test cases")
    return TestSet(
        name=name or parsed.name or p.stem,
        knowledge_base=parsed.knowledge_base,
        description=parsed.description,
        cases=tuple(c for _, c in parsed.cases),
    )


class StreamedTestSet:
    """A UTF-8 JSONL or CSV test-set file read one line (row) at a time (a
    :class:`~ragpulse.protocols.CaseSource`): opening it reads the file once to check every line (the errors of
    :func:`load_test_set`, with file and line), count the cases and compute their
    :func:`~ragpulse.model.cases_hash`; :meth:`iter_cases` reads it again each time. Memory holds one line at a
    time plus the case ids (duplicate check), not the cases. CSV rows go through :class:`csv.DictReader` over
    the open file; a CSV that does not decode or has a quote left open is read again whole by
    :func:`load_test_set` for its error message (which names the line).

    The file must not change while it is replayed.
    """

    def __init__(
        self, path: Path, name: str, *, bom: bool, csv: bool = False, csv_delimiter: str | None = None
    ) -> None:
        self.path = path
        self.name = name
        self.knowledge_base: str | None = None
        self.description: str | None = None
        self._bom = bom
        self._csv = csv
        self._delimiter = csv_delimiter
        count = 0

        def counted() -> Iterator[TestCase]:
            nonlocal count
            for case in self.iter_cases():
                count += 1
                yield case

        self._hash = cases_hash(counted())
        self.case_count = count
        if not count:
            raise TestSetError(f"{path}: no test cases")

    def content_hash(self) -> str:
        """``sha256:<hex>`` of the cases (computed when the file was opened)."""
        return self._hash

    def _lines(self) -> Iterator[str]:
        try:
            fh = self.path.open("rb")
        except OSError as e:
            raise TestSetError(f"{self.path}: cannot read test set: {e}") from e
        with fh:
            for n, raw in enumerate(fh, start=1):
                data = raw[len(codecs.BOM_UTF8) :] if n == 1 and self._bom else raw
                if data.endswith(b"\n"):
                    data = data[:-1]
                try:
                    yield data.decode("utf-8")
                except UnicodeDecodeError as e:
                    if n == 1 and self._bom:
                        e.start += len(codecs.BOM_UTF8)
                        data = raw
                    raise _decode_error(self.path, data, e, None, first_line=n) from e

    def iter_cases(self) -> Iterator[TestCase]:
        """The cases in file order, parsed as the file is read.

        Raises:
            TestSetError: a line is not valid (possible only if the file changed since it was opened).
        """
        col = _Collector(str(self.path), collect=False)
        if self._csv:
            yield from self._csv_cases(col)
            return
        for _, case in _iter_cases(_jsonl_rows(self._lines(), col), "line", col):
            yield case

    def _csv_cases(self, col: _Collector) -> Iterator[TestCase]:
        try:
            with self.path.open(encoding="utf-8-sig" if self._bom else "utf-8", newline="") as fh:
                first = fh.readline()
                fh.seek(0)
                for _, case in _iter_cases(_csv_rows(first, self._delimiter, col, fh), "row", col):
                    yield case
        except (UnicodeDecodeError, _Reread) as e:
            load_test_set(
                self.path, self.name, csv_delimiter=self._delimiter
            )  # raises its error, with the line
            raise TestSetError(f"{self.path}: cannot read the CSV file ({e})") from e
        except OSError as e:
            raise TestSetError(f"{self.path}: cannot read test set: {e}") from e


def open_test_set(
    path: str | Path,
    name: str | None = None,
    *,
    encoding: str | None = None,
    csv_delimiter: str | None = None,
) -> CaseSource:
    """The test set of ``path`` for a replay: a UTF-8 JSONL or CSV file (the default encoding, or a UTF-8
    byte-order mark, or ``encoding`` ``utf-8``) is streamed (:class:`StreamedTestSet`: constant memory whatever
    its size); any other file (``.json``, another encoding) is read whole by :func:`load_test_set`. Same
    arguments, names and errors as :func:`load_test_set`.

    Raises:
        TestSetError: see :func:`load_test_set`.
    """
    p = Path(path)
    suffix = p.suffix.lower()
    utf8 = _known(encoding) and (encoding is None or codecs.lookup(encoding).name in ("utf-8", "utf-8-sig"))
    delimiter = {"tab": "\t", "\\t": "\t"}.get(csv_delimiter or "", csv_delimiter) or None
    if suffix == ".json" or not utf8 or (delimiter is not None and len(delimiter) != 1):
        return load_test_set(p, name, encoding=encoding, csv_delimiter=csv_delimiter)
    try:
        with p.open("rb") as fh:
            head = fh.read(4096)
    except FileNotFoundError as e:
        raise TestSetError(f"{p}: test set file not found") from e
    except OSError as e:
        raise TestSetError(f"{p}: cannot read test set: {e}") from e
    bom = head.startswith(codecs.BOM_UTF8)
    if encoding is None and not bom and any(head.startswith(b) for b, _ in _BOMS):
        return load_test_set(p, name, encoding=encoding, csv_delimiter=csv_delimiter)  # UTF-16/32 BOM
    if encoding is None and _looks_utf16_without_bom(head):
        raise TestSetError(
            f"{p}:1: the file must be UTF-8: it looks like UTF-16 or UTF-32 without a byte-order mark "
            "(many NUL bytes); convert it or pass --encoding (e.g. utf-16-le)"
        )
    return StreamedTestSet(p, name or p.stem, bom=bom, csv=suffix == ".csv", csv_delimiter=delimiter)


def _known(encoding: str | None) -> bool:
    if encoding is None:
        return True
    try:
        codecs.lookup(encoding)
    except LookupError:
        return False
    return True


class SpooledTestSet:
    """A stored test set replayed without holding it in memory (a :class:`~ragpulse.protocols.CaseSource`): its
    cases, read once from the store, are kept in an anonymous temporary file (one JSON line per case, exactly
    as read: the same :func:`~ragpulse.model.cases_hash`), read again for each pass. Built by
    :func:`spool_test_set`; :meth:`close` (or garbage collection) deletes the file.
    """

    def __init__(self, name: str, knowledge_base: str | None, description: str | None) -> None:
        self.name = name
        self.knowledge_base = knowledge_base
        self.description = description
        self.case_count = 0
        self._file = tempfile.TemporaryFile("w+b")  # noqa: SIM115 (lives as long as the object)
        self._hash = ""

    def content_hash(self) -> str:
        """``sha256:<hex>`` of the cases."""
        return self._hash

    def iter_cases(self) -> Iterator[TestCase]:
        """The cases in order (each pass keeps its own place in the file)."""
        pos = 0
        while True:
            self._file.seek(pos)
            line = self._file.readline()
            if not line:
                return
            pos = self._file.tell()
            yield TestCase.model_validate_json(line)

    def close(self) -> None:
        """Delete the temporary file."""
        self._file.close()


async def spool_test_set(
    name: str, knowledge_base: str | None, description: str | None, cases: AsyncIterator[TestCase]
) -> SpooledTestSet:
    """A :class:`SpooledTestSet` of ``cases`` (read once, in order), hashed as they are written."""
    ts = SpooledTestSet(name, knowledge_base, description)
    try:
        async for case in cases:
            ts._file.write(case.model_dump_json().encode("utf-8") + b"\n")
            ts.case_count += 1
        ts._file.flush()
        ts._hash = cases_hash(ts.iter_cases())
    except BaseException:
        ts.close()
        raise
    return ts
