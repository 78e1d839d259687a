"""Loading test sets: formats, aliases, metadata, generated ids, errors with line numbers."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ragpulse.runs import TestSetError, load_test_set


def _jsonl(tmp_path: Path, rows: list[object], name: str = "kb.jsonl") -> Path:
    p = tmp_path / name
    p.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    return p


def test_jsonl_aliases_metadata_and_name(tmp_path: Path) -> None:
    p = _jsonl(
        tmp_path,
        [
            {
                "id": "c1",
                "question": "How do I claim?",
                "ground_truth": "Use Ledgerly.",
                "keywords": ["Ledgerly", "30 days"],
                "answer": "Use Ledgerly within 30 days.",
                "retrieved_contexts": ["Claims go through Ledgerly.", "Deadline is 30 days."],
                "retrievedDocIds": ["fin#1", "fin#2"],
                "context_labels": [1, 0],
                "app": "kestrel-hr",
                "note": "faithful",
            },
            {"question": "年假有几天？", "expectedAnswer": "15天", "keywords": "年假，15天"},
            {"question": "q3", "reference_answer": "r3", "contexts": [{"content": "ctx", "id": "d9"}]},
        ],
    )
    ts = load_test_set(p)
    assert ts.name == "kb"
    assert len(ts.cases) == 3
    c1, c2, c3 = ts.cases
    assert c1.id == "c1"
    assert c1.expected_answer == "Use Ledgerly."
    assert c1.keywords == ("Ledgerly", "30 days")
    assert c1.contexts == ("Claims go through Ledgerly.", "Deadline is 30 days.")
    assert c1.doc_ids == ("fin#1", "fin#2")
    assert c1.context_labels == (1, 0)
    assert c1.metadata == {"app": "kestrel-hr", "note": "faithful"}
    assert c2.id == "line-2"
    assert c2.expected_answer == "15天"
    assert c2.keywords == ("年假", "15天")
    assert c2.answer is None
    assert c2.contexts == ()
    assert c3.expected_answer == "r3"
    assert c3.contexts == ("ctx",)
    assert c3.doc_ids == ("d9",)


def test_blank_lines_are_skipped_and_ids_follow_line_numbers(tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_text('{"question": "a"}\n\n{"question": "b"}\n', encoding="utf-8")
    assert [c.id for c in load_test_set(p).cases] == ["line-1", "line-3"]


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ('{"question": "a"}\n{"question": \n', "t.jsonl:2: line 2 is not valid JSON"),
        ('{"question": "a"}\n["not", "an", "object"]\n', "t.jsonl:2: line 2: a case must be a JSON object"),
        (
            '{"id": "x", "question": "a"}\n{"id": "x", "question": "b"}\n',
            "t.jsonl:2: duplicate case id 'x' (first at line 1)",
        ),
        ('{"question": "a"}\n{"answer": "b"}\n', "t.jsonl:2: line 2: question is required (question, query"),
        ('{"question": " "}\n', "t.jsonl:1: line 1: question is required"),
        ('{"question": "a", "contexts": [1, 2]}\n', "t.jsonl:1: line 1: contexts[0] must be a string"),
        ('{"question": "a", "context_labels": [0, 2]}\n', "context_labels[1] must be 0 or 1"),
        ('{"question": ["a"]}\n', "t.jsonl:1: line 1: question must be a string"),
        ("\n\n", "no test cases"),
    ],
)
def test_bad_rows_name_file_and_line(tmp_path: Path, content: str, needle: str) -> None:
    p = tmp_path / "t.jsonl"
    p.write_text(content, encoding="utf-8")
    with pytest.raises(TestSetError) as ei:
        load_test_set(p)
    assert needle in str(ei.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TestSetError, match="not found"):
        load_test_set(tmp_path / "nope.jsonl")


def test_json_object_and_list(tmp_path: Path) -> None:
    obj = tmp_path / "o.json"
    obj.write_text(
        json.dumps({"name": "policies", "knowledge_base": "hr-kb", "cases": [{"id": "a", "question": "q"}]}),
        encoding="utf-8",
    )
    ts = load_test_set(obj)
    assert (ts.name, ts.knowledge_base, [c.id for c in ts.cases]) == ("policies", "hr-kb", ["a"])
    lst = tmp_path / "l.json"
    lst.write_text(json.dumps([{"question": "q1"}, {"question": "q2", "id": 7}]), encoding="utf-8")
    ts2 = load_test_set(lst)
    assert ts2.name == "l"
    assert [c.id for c in ts2.cases] == ["line-1", "7"]
    bad = tmp_path / "b.json"
    bad.write_text('{"cases": [{"question": "q"}, 5]}', encoding="utf-8")
    with pytest.raises(TestSetError, match=r"b.json:2: case 2: a case must be a JSON object"):
        load_test_set(bad)


def test_csv_cells(tmp_path: Path) -> None:
    p = tmp_path / "s.csv"
    p.write_text(
        "id,question,expected_answer,keywords,answer,contexts,doc_ids,team\n"
        'c1,How?,Like this,"a, b",Do it,"[""ctx one"", ""ctx two""]","d1,d2",ops\n'
        "c2,Why?,,,,single context,,\n",
        encoding="utf-8",
    )
    ts = load_test_set(p)
    c1, c2 = ts.cases
    assert c1.keywords == ("a", "b")
    assert c1.contexts == ("ctx one", "ctx two")
    assert c1.doc_ids == ("d1", "d2")
    assert c1.metadata == {"team": "ops"}
    assert c2.expected_answer is None
    assert c2.answer is None
    assert c2.contexts == ("single context",)
    assert c2.metadata == {"team": None}
    bad = tmp_path / "bad.csv"
    bad.write_text('id,question,contexts\nc1,q,"[broken"\n', encoding="utf-8")
    with pytest.raises(TestSetError, match=r"bad.csv:2: row 2: contexts looks like a JSON array"):
        load_test_set(bad)


def test_shipped_examples_load() -> None:
    root = Path(__file__).resolve().parents[2]
    kb = root / "examples" / "kestrel_kb.jsonl"
    if not kb.exists():
        pytest.skip("examples not in this checkout")
    ts = load_test_set(kb)
    assert ts.name == "kestrel_kb"
    assert len(ts.cases) == 17
    assert all(c.question for c in ts.cases)
    assert ts.cases[0].metadata["app"] == "kestrel-hr"


def test_jsonl_keeps_unicode_line_separators_inside_strings(tmp_path: Path) -> None:
    """``json.dumps(..., ensure_ascii=False)`` writes U+2028/U+2029/U+0085 raw; only ``\\n`` ends a line."""
    p = tmp_path / "u.jsonl"
    rows = [
        {"id": "u1", "question": "What does the policy say?", "answer": "It says yes.\u2028Really."},
        {"id": "u2", "question": "第二\u2029问题\x85?", "answer": "A"},
    ]
    p.write_text("".join(json.dumps(r, ensure_ascii=False) + "\r\n" for r in rows), encoding="utf-8")
    ts = load_test_set(p)
    assert [c.id for c in ts.cases] == ["u1", "u2"]
    assert ts.cases[0].answer == "It says yes.\u2028Really."
    assert ts.cases[1].question == "第二\u2029问题\x85?"


def test_csv_multiline_cells_keep_their_line_breaks(tmp_path: Path) -> None:
    """Quoted cells may span lines (RFC 4180); U+2028 inside a cell does not start a new row."""
    p = tmp_path / "m.csv"
    p.write_bytes(
        'id,question,answer\r\nm1,"What is\nthe policy?","Line one.\r\nLine two."\r\nm2,Q2\u2028x,A2\r\n'.encode()
    )
    ts = load_test_set(p)
    assert [c.id for c in ts.cases] == ["m1", "m2"]
    assert ts.cases[0].question == "What is\nthe policy?"
    assert ts.cases[0].answer == "Line one.\r\nLine two."
    assert ts.cases[1].question == "Q2\u2028x"
    assert ts.cases[1].answer == "A2"


def test_csv_unterminated_quote_is_an_error(tmp_path: Path) -> None:
    p = tmp_path / "q.csv"
    p.write_text('id,question,answer\nc1,"unterminated,x\nc2,q,a\n', encoding="utf-8")
    with pytest.raises(TestSetError, match=r"q.csv:\d+: not valid CSV: unexpected end of data"):
        load_test_set(p)


def test_json_nested_too_deeply_is_an_error(tmp_path: Path) -> None:
    for name in ("d.json", "d.jsonl"):
        p = tmp_path / name
        p.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
        with pytest.raises(TestSetError, match=r"d.jsonl?:1: .*too_deep: JSON nested deeper than 64 levels"):
            load_test_set(p)


def test_csv_row_with_more_cells_than_the_header_is_an_error(tmp_path: Path) -> None:
    """An unquoted comma in an answer must not silently cut the answer short."""
    p = tmp_path / "x.csv"
    p.write_text("id,question,answer\nc1,Can I carry leave over?,Yes, up to 5 days\n", encoding="utf-8")
    with pytest.raises(
        TestSetError, match=r"x.csv:2: row 2: 4 cells but the header has 3 \(unquoted comma\?\)"
    ):
        load_test_set(p)


# --- reading the file the way the user meant (issue 13) ---


@pytest.mark.parametrize(("delimiter", "name"), [(";", "semi"), ("\t", "tab"), ("|", "pipe")])
def test_csv_delimiter_is_detected_from_the_header(tmp_path: Path, delimiter: str, name: str) -> None:
    p = tmp_path / f"{name}.csv"
    d = delimiter
    p.write_text(
        f"id{d}question{d}answer{d}keywords\n"
        f"c1{d}Can I carry leave over?{d}Yes, up to 5 days.{d}5 days, carry over\n"
        f"c2{d}Who approves?{d}Your manager, then HR.{d}manager\n",
        encoding="utf-8",
    )
    ts = load_test_set(p)
    assert [c.id for c in ts.cases] == ["c1", "c2"]
    assert ts.cases[0].question == "Can I carry leave over?"
    assert ts.cases[0].answer == "Yes, up to 5 days."
    assert ts.cases[0].keywords == ("5 days", "carry over")
    assert ts.cases[1].answer == "Your manager, then HR."
    assert ts.cases[1].metadata == {}


def test_csv_delimiter_option(tmp_path: Path) -> None:
    p = tmp_path / "t.csv"
    p.write_text("question\tanswer\nq1\ta1\n", encoding="utf-8")
    for given in ("\t", "tab", "\\t"):
        ts = load_test_set(p, csv_delimiter=given)
        assert (ts.cases[0].question, ts.cases[0].answer) == ("q1", "a1")
    # forcing the wrong delimiter: the header is one unknown column
    with pytest.raises(
        TestSetError, match=r"t.csv:1: no known column in the CSV header .* with --csv-delimiter ';'"
    ):
        load_test_set(p, csv_delimiter=";")
    with pytest.raises(TestSetError, match="must be one character"):
        load_test_set(p, csv_delimiter=";;")


def test_csv_with_no_known_column_is_an_error(tmp_path: Path) -> None:
    p = tmp_path / "de.csv"
    p.write_text("frage;antwort\nWo?;Hier.\n", encoding="utf-8")
    with pytest.raises(TestSetError) as ei:
        load_test_set(p)
    msg = str(ei.value)
    assert msg.startswith(f"{p}:1: no known column in the CSV header 'frage;antwort' with any delimiter of ")
    assert "expected at least one of " in msg
    assert "question" in msg
    assert "--csv-delimiter" in msg


def test_gbk_file_says_it_must_be_utf8(tmp_path: Path) -> None:
    p = tmp_path / "zh.jsonl"
    good = json.dumps({"question": "What?"}) + "\n"
    p.write_bytes(
        good.encode() + json.dumps({"question": "年假有几天？"}, ensure_ascii=False).encode("gbk") + b"\n"
    )
    with pytest.raises(TestSetError) as ei:
        load_test_set(p)
    assert str(ei.value) == (
        f"{p}:2: the file must be UTF-8 (or start with a byte-order mark): byte 0xC4 at line 2, column 15 is "
        "not UTF-8; convert the file or pass --encoding (e.g. gbk, utf-16)"
    )
    ts = load_test_set(p, encoding="gbk")
    assert [c.question for c in ts.cases] == ["What?", "年假有几天？"]
    with pytest.raises(TestSetError, match="unknown encoding 'nope'"):
        load_test_set(p, encoding="nope")


def test_utf16_and_utf8_byte_order_marks_are_honoured(tmp_path: Path) -> None:
    text = "id,question,answer\nz1,年假有几天？,15天\n"
    for enc in ("utf-16", "utf-32", "utf-8-sig"):  # Python writes these with a BOM
        p = tmp_path / f"{enc}.csv"
        p.write_bytes(text.encode(enc))
        ts = load_test_set(p)
        assert [(c.id, c.question, c.answer) for c in ts.cases] == [("z1", "年假有几天？", "15天")]
    p = tmp_path / "nobom.csv"
    p.write_bytes(text.encode("utf-16-le"))
    with pytest.raises(TestSetError, match=r"nobom.csv:1: the file must be UTF-8: it looks like UTF-16"):
        load_test_set(p)
    assert load_test_set(p, encoding="utf-16-le").cases[0].answer == "15天"


def test_csv_unterminated_quote_is_reported_where_the_cell_opens(tmp_path: Path) -> None:
    p = tmp_path / "q.csv"
    p.write_text('id,question,answer\nc1,q1,a1\n\nc2,"unterminated,x\nc3,q,a\nc4,q,a\n', encoding="utf-8")
    with pytest.raises(TestSetError) as ei:
        load_test_set(p)
    assert str(ei.value) == (
        f"{p}:4: not valid CSV: unexpected end of data: the quoted cell of the row starting on line 4 is "
        "never closed"
    )


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_non_finite_numbers_are_rejected(tmp_path: Path, constant: str) -> None:
    """Python's json reads NaN/Infinity; jsonb would store them as null. Rejected like the Kafka path does."""
    p = tmp_path / "n.jsonl"
    p.write_text(f'{{"question": "a"}}\n{{"question": "b", "score": {constant}}}\n', encoding="utf-8")
    with pytest.raises(TestSetError) as ei:
        load_test_set(p)
    name = constant if constant != "1e999" else "1e999"
    assert str(ei.value).startswith(f"{p}:2: line 2 is not valid JSON: {name} is not a ")
    j = tmp_path / "n.json"
    j.write_text(f'[{{"question": "b", "meta": {{"x": [{constant}]}}}}]', encoding="utf-8")
    with pytest.raises(TestSetError, match=f"n.json: not valid JSON: {re.escape(constant)} is not a"):
        load_test_set(j)
