"""Diagnosis of the weak side (retrieval vs generation) from report rows."""

from __future__ import annotations

from typing import Any

from ragpulse.runs.diagnosis import diagnose
from ragpulse.runs.report_model import CaseRow, ClaimCauses


def _row(case_id: str, **scores: tuple[float, bool] | str) -> CaseRow:
    js: dict[str, Any] = {}
    for name, v in scores.items():
        if isinstance(v, str):
            js[name] = {"score": None, "passed": None, "status": v, "reason": v}
        else:
            js[name] = {"score": v[0], "passed": v[1], "status": "ok", "reason": ""}
    return CaseRow.model_validate({"case_id": case_id, "judgements": js})


def test_case_by_case_and_overall() -> None:
    rows = [
        _row(
            "r1", context_recall=(0.25, False), context_precision=(1.0, True), answer_correctness=(0.3, False)
        ),
        _row("r2", context_recall=(1.0, True), context_precision=(0.2, False), faithfulness=(1.0, True)),
        _row("g1", context_recall=(1.0, True), context_precision=(1.0, True), faithfulness=(0.4, False)),
        _row("ok", context_recall=(1.0, True), context_precision=(0.8, True), answer_correctness=(0.9, True)),
        _row("u1", faithfulness=(0.1, False)),
        _row("u2", context_recall=(1.0, True), answer_correctness="error"),
    ]
    d = diagnose(rows).model_dump()
    sides = {c["case_id"]: c["weak_side"] for c in d["cases"]}
    assert sides == {
        "r1": "retrieval",
        "r2": "retrieval",
        "g1": "generation",
        "ok": "none",
        "u1": "undetermined",
        "u2": "undetermined",
    }
    r1 = d["cases"][0]
    assert "context_recall 0.25" in r1["reason"]
    assert "knowledge base" in r1["reason"]
    assert "generation also low: answer_correctness 0.30" in r1["reason"]
    assert "ranked high" in d["cases"][1]["reason"]
    o = d["overall"]
    assert o["weak_side"] == "retrieval"
    assert o["cases"] == {"retrieval": 2, "generation": 1, "none": 1, "undetermined": 2}
    assert o["means"]["context_recall"] == round((0.25 + 1 + 1 + 1 + 1) / 5, 6)
    assert o["means"]["faithfulness"] == round((1.0 + 0.4 + 0.1) / 3, 6)


def test_relevance_fallback_generation_side_and_ties() -> None:
    rows = [
        _row("a", context_relevance=(0.9, True), faithfulness=(0.2, False)),
        _row("b", context_relevance=(0.1, False), faithfulness=(1.0, True)),
    ]
    d = diagnose(rows).model_dump()
    assert [c["weak_side"] for c in d["cases"]] == ["generation", "retrieval"]
    assert d["overall"]["weak_side"] == "both"
    # relevance is ignored when recall/precision exist
    d2 = diagnose(
        [_row("c", context_recall=(1.0, True), context_relevance=(0.0, False), faithfulness=(0.1, False))]
    ).model_dump()
    assert d2["cases"][0]["weak_side"] == "generation"


def test_empty_and_all_good() -> None:
    assert diagnose([]).overall.weak_side == "undetermined"
    d = diagnose([_row("x", context_precision=(1.0, True), answer_correctness=(1.0, True))])
    assert d.overall.weak_side == "none"


def _with_causes(row: CaseRow, misses: int, errors: int) -> CaseRow:
    return row.model_copy(
        update={"claim_causes": ClaimCauses(retrieval_misses=misses, generation_errors=errors)}
    )


def test_claim_causes_decide_the_side_the_scores_leave_open() -> None:
    """Unsupported claims attributed to a reference context that was not retrieved point at retrieval even
    when the retrieval scores passed; claims no reference supports point at generation (issue 14 §1)."""
    fine = {"context_recall": (1.0, True), "context_precision": (1.0, True), "faithfulness": (0.2, False)}
    rows = [
        _with_causes(_row("miss", **fine), 2, 1),  # most claims: retrieval misses
        _with_causes(_row("tie", **fine), 1, 1),  # as many: retrieval (the missing chunk explains the rest)
        _with_causes(_row("gen", **fine), 1, 3),  # most claims: generation errors
        _with_causes(_row("solo-gen", faithfulness=(0.1, False)), 0, 2),  # no retrieval metric
        _with_causes(_row("solo-miss", faithfulness=(0.1, False)), 2, 0),
        _with_causes(_row("both-low", context_recall=(0.2, False), faithfulness=(0.1, False)), 1, 0),
        _row("plain", **fine),  # no claim evidence: as before
    ]
    d = diagnose(rows)
    got = {c.case_id: (c.weak_side, c.reason) for c in d.cases}
    assert got["miss"] == (
        "retrieval",
        "retrieval scores fine (context_recall 1.00, context_precision 1.00) but low faithfulness 0.20: 2 of 3 "
        "unsupported claim(s) are in a reference context that was not retrieved: the retriever missed it",
    )
    assert got["tie"][0] == "retrieval"
    assert got["gen"] == (
        "generation",
        "retrieval fine (context_recall 1.00, context_precision 1.00) but low faithfulness 0.20: 1 of 4 "
        "unsupported claim(s) are in a reference context that was not retrieved",
    )
    assert got["solo-gen"] == (
        "generation",
        "no retrieval metric scored; low faithfulness 0.10: 2 unsupported claim(s) are in no reference context",
    )
    assert got["solo-miss"][0] == "retrieval"
    assert got["solo-miss"][1].startswith("no retrieval metric scored but low faithfulness 0.10: 2 of 2")
    assert got["both-low"] == (
        "retrieval",
        "low context_recall 0.20: the retriever or knowledge base misses needed content (generation also low: "
        "faithfulness 0.10; 1 of 1 unsupported claim(s) are in a reference context that was not retrieved)",
    )
    assert got["plain"] == (
        "generation",
        "retrieval fine (context_recall 1.00, context_precision 1.00) but low faithfulness 0.20",
    )
    assert d.overall.cases == {"retrieval": 4, "generation": 3, "none": 0, "undetermined": 0}
    assert d.overall.weak_side == "retrieval"
