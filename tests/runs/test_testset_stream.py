"""A JSONL test set streamed from its file (``open_test_set``) reads the same cases, hash and errors as the
whole-file loader (``load_test_set``)."""

from __future__ import annotations

import codecs
import json
from pathlib import Path

import pytest

from ragpulse.model import TestSet
from ragpulse.runs.testset_files import StreamedTestSet, TestSetError, load_test_set, open_test_set

GOOD: list[dict[str, object]] = [
    {"id": "a", "question": "q1", "answer": "x\u2028y", "contexts": ["c1", {"content": "c2", "id": "d2"}]},
    {"question": "q2", "keywords": "k1, k2", "meta": {"n": 1}},
    {"id": "c", "query": "q3 \ud83d", "ground_truth": "g", "context_labels": [1, 0], "contexts": ["a", "b"]},
]


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


def _jsonl(rows: list[dict[str, object]]) -> bytes:
    # raw U+2028 in a string (ensure_ascii=False), but the lone surrogate as its JSON escape
    lines = [json.dumps(r, ensure_ascii=not i) if i != 2 else json.dumps(r) for i, r in enumerate(rows)]
    return ("\n".join(lines) + "\n\n").encode("utf-8")


@pytest.mark.parametrize("bom", [False, True])
def test_streamed_cases_hash_and_count_equal_the_loaded_ones(tmp_path: Path, bom: bool) -> None:
    p = _write(
        tmp_path, "set.jsonl", (codecs.BOM_UTF8 if bom else b"") + _jsonl(GOOD).replace(b"\n", b"\r\n", 1)
    )
    streamed = open_test_set(p)
    loaded = load_test_set(p)
    assert isinstance(streamed, StreamedTestSet)
    assert streamed.name == loaded.name == "set"
    assert streamed.case_count == 3
    assert list(streamed.iter_cases()) == list(loaded.cases)
    assert list(streamed.iter_cases()) == list(streamed.iter_cases())  # every pass reads the same
    assert streamed.content_hash() == loaded.content_hash()
    assert [c.id for c in streamed.iter_cases()] == ["a", "line-2", "c"]
    assert [c.origin for c in streamed.iter_cases()] == [f"{p}:1", f"{p}:2", f"{p}:3"]
    assert open_test_set(p, "other").name == "other"


@pytest.mark.parametrize(
    ("data", "line"),
    [
        (b'{"id": "a", "question": "q"}\n{"id": "b", "question": \n', 2),  # not valid JSON
        (b'{"id": "a", "question": "q"}\n\n{"id": "a", "question": "r"}\n', 3),  # duplicate id
        (b'{"id": "a", "question": "q"}\n{"id": "b", "question": "\xc4\xe3"}\n', 2),  # GBK bytes
        (b'{"id": "a", "question": NaN}\n', 1),
        (b'{"id": "a", "contexts": 3}\n', 1),
        (b"\n\n", None),  # no cases
    ],
)
def test_streamed_errors_equal_the_loaded_ones(tmp_path: Path, data: bytes, line: int | None) -> None:
    p = _write(tmp_path, "bad.jsonl", data)
    with pytest.raises(TestSetError) as loaded:
        load_test_set(p)
    with pytest.raises(TestSetError) as streamed:
        open_test_set(p)
    assert str(streamed.value) == str(loaded.value)
    assert str(streamed.value).startswith(f"{p}:{line}:" if line else f"{p}: no test cases")


CSV_GOOD = (
    "id;question;contexts;keywords;answer\r\n"
    'a;"two\r\nlines";"[""c1"", ""c2""]";k1,k2;x\r\n'
    "\r\n"
    'b;q2;one context;;"semi;colon"\r\n'
)


@pytest.mark.parametrize("bom", [False, True])
@pytest.mark.parametrize("delimiter", [None, ";"])
def test_streamed_csv_equals_the_loaded_one(tmp_path: Path, bom: bool, delimiter: str | None) -> None:
    p = _write(tmp_path, "set.csv", (codecs.BOM_UTF8 if bom else b"") + CSV_GOOD.encode())
    streamed = open_test_set(p, csv_delimiter=delimiter)
    loaded = load_test_set(p, csv_delimiter=delimiter)
    assert isinstance(streamed, StreamedTestSet)
    assert streamed.case_count == 2
    assert list(streamed.iter_cases()) == list(loaded.cases)
    assert streamed.content_hash() == loaded.content_hash()
    first = next(streamed.iter_cases())
    assert (first.id, first.question, first.contexts, first.keywords) == (
        "a",
        "two\r\nlines",
        ("c1", "c2"),
        ("k1", "k2"),
    )
    assert [c.origin for c in streamed.iter_cases()] == [f"{p}:3", f"{p}:5"]


@pytest.mark.parametrize(
    ("data", "line"),
    [
        (b'id,question\na,q\n\n\nb,"open\nc,q\n', 5),  # a quote left open: the row's first line
        (b"id,question\na,q,extra\n", 2),  # more cells than the header
        (b"id,question\na,q\nb,\xc4\xe3\n", 3),  # GBK bytes
        (b"foo;bar\n1;2\n", 1),  # no known column
        (b"id,question\na,q\na,r\n", 3),  # duplicate id
    ],
)
def test_streamed_csv_errors_equal_the_loaded_ones(tmp_path: Path, data: bytes, line: int) -> None:
    p = _write(tmp_path, "bad.csv", data)
    with pytest.raises(TestSetError) as loaded:
        load_test_set(p)
    with pytest.raises(TestSetError) as streamed:
        open_test_set(p)
    assert str(streamed.value) == str(loaded.value)
    assert str(streamed.value).startswith(f"{p}:{line}:")


def test_other_files_are_loaded_whole(tmp_path: Path) -> None:
    json_file = _write(tmp_path, "s.json", b'[{"id": "a", "question": "q"}]')
    assert isinstance(open_test_set(json_file), TestSet)
    utf16 = _write(tmp_path, "s16.jsonl", _jsonl(GOOD[:1]).decode().encode("utf-16"))
    assert isinstance(open_test_set(utf16), TestSet)
    gbk = _write(tmp_path, "g.jsonl", '{"id": "a", "question": "你好"}\n'.encode("gbk"))
    got = open_test_set(gbk, encoding="gbk")
    assert isinstance(got, TestSet)
    assert got.cases[0].question == "你好"
    with pytest.raises(TestSetError, match="test set file not found"):
        open_test_set(tmp_path / "missing.jsonl")


def test_csv_cells_longer_than_the_csv_module_default_are_read(tmp_path: Path) -> None:
    """A 300,000-character answer (over the csv module's default limit of 131,072) reads as from JSONL."""
    answer = "word " * 60_000
    p = _write(tmp_path, "long.csv", f"id,question,answer\nl1,What?,{answer}\nl2,Why?,ok\n".encode())
    streamed = open_test_set(p)
    assert isinstance(streamed, StreamedTestSet)
    assert [(c.id, len(c.answer or "")) for c in streamed.iter_cases()] == [("l1", 300_000), ("l2", 2)]
    assert [c.answer for c in load_test_set(p).cases] == [answer, "ok"]


@pytest.mark.parametrize("data", [b"", b"\n\n", b"\xef\xbb\xbf", b"id;question\r\n"])
def test_a_csv_without_cases_has_no_test_cases_streamed_and_loaded(tmp_path: Path, data: bytes) -> None:
    p = _write(tmp_path, "empty.csv", data)
    with pytest.raises(TestSetError) as loaded:
        load_test_set(p)
    with pytest.raises(TestSetError) as streamed:
        open_test_set(p)
    assert str(loaded.value) == str(streamed.value) == f"{p}: no test cases"
