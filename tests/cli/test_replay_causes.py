"""Run reports count the causes of unsupported claims (``retrieval_misses``, ``generation_errors``; issue 14
§1): ``ragpulse replay`` on real PostgreSQL with the scripted judge model (claims mode) and offline, English
and Chinese cases, and the stored report read back by ``runs show``."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ragpulse.cli import app
from ragpulse.testing.openai_server import RecordedRequest, ScriptedOpenAIServer

REFUNDS = "Refunds are paid within 30 days of purchase."
SHIPPING = "Orders ship from Rotterdam in two days."
REFUNDS_ZH = "退款在购买后30天内支付。"
SHIPPING_ZH = "订单从鹿特丹发货，需要两天。"
CASES = [
    # a reference context the retrieval missed supports sentence 2; nothing supports sentence 3
    {
        "id": "en-miss",
        "question": "How do refunds and shipping work?",
        "answer": "Refunds are paid within 30 days. Orders ship from Rotterdam in two days. The shop opened in 1990.",
        "contexts": [REFUNDS],
        "reference_contexts": [REFUNDS, SHIPPING],
    },
    {
        "id": "zh-miss",
        "question": "退款和发货怎么安排？",
        "answer": "退款在购买后30天内支付。订单从鹿特丹发货，需要两天。商店成立于1990年。",
        "contexts": [REFUNDS_ZH],
        "reference_contexts": [REFUNDS_ZH, SHIPPING_ZH],
    },
    # every reference context was retrieved: the unsupported sentence is a generation error
    {
        "id": "en-gen",
        "question": "How do refunds work?",
        "answer": "Refunds are paid within 30 days. The shop opened in 1990.",
        "contexts": [REFUNDS],
        "reference_contexts": [REFUNDS],
    },
    # passes: nothing to attribute
    {
        "id": "en-pass",
        "question": "How do refunds work?",
        "answer": "Refunds are paid within 30 days.",
        "contexts": [REFUNDS],
        "reference_contexts": [REFUNDS, SHIPPING],
    },
]

_BLOCK = r"<<<{0}\n(.*?)\n{0}>>>"


def _block(text: str, *names: str) -> str:
    for name in names:
        m = re.search(_BLOCK.format(name), text, re.S)
        if m:
            return m.group(1)
    raise AssertionError(f"no {names} block in {text!r}")


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.。])\s*", text) if s.strip()]


def _covered(claim: str, passage: str) -> bool:
    return claim.rstrip(".。") in passage


def _oracle(req: RecordedRequest) -> str:
    """A judge that is right: a claim (an answer sentence) is supported when a context holds it, and the
    attribution names the first missed passage that holds it."""
    text = req.user_text
    if '"claims"' in text:
        context = _block(text, "CONTEXT", "资料")
        answer = _block(text, "ANSWER", "回答")
        claims = [{"claim": s, "supported": _covered(s, context)} for s in _sentences(answer)]
        return json.dumps({"claims": claims}, ensure_ascii=False)
    claims = re.findall(r"^(\d+)\. (.*)$", _block(text, "CLAIMS", "陈述"), re.M)
    passages = re.findall(r"^\[(\d+)\] (.*)$", _block(text, "PASSAGES", "段落"), re.M)
    verdicts = [
        {"claim": int(n), "passage": next((int(k) for k, p in passages if _covered(c, p)), None)}
        for n, c in claims
    ]
    return json.dumps({"verdicts": verdicts})


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer(_oracle) as server:
        monkeypatch.setenv("RAGPULSE_JUDGE_MODEL", "judge-test")
        monkeypatch.setenv("RAGPULSE_JUDGE_BASE_URL", server.base_url)
        monkeypatch.setenv("RAGPULSE_JUDGE_API_KEY", "sk-test")
        yield server


def _json(args: list[str]) -> dict[str, Any]:
    res = CliRunner().invoke(app, [*args, "--json"])
    assert res.exit_code in (0, 1), res.output
    out: dict[str, Any] = json.loads(res.stdout)
    return out


def _test_set(tmp_path: Path) -> Path:
    p = tmp_path / "causes.jsonl"
    p.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in CASES), encoding="utf-8")
    return p


def _check(report: dict[str, Any]) -> None:
    assert (report["retrieval_misses"], report["generation_errors"]) == (2, 3)
    faith = report["judges"]["faithfulness"]
    assert (faith["retrieval_misses"], faith["generation_errors"]) == (2, 3)
    assert (faith["pass"], faith["fail"]) == (1, 3)


def test_report_counts_retrieval_misses_and_generation_errors_with_the_judge_model(
    db: str, model: ScriptedOpenAIServer, tmp_path: Path
) -> None:
    r = _json(
        ["replay", str(_test_set(tmp_path)), "--judges", "faithfulness,keyword", "--run-id", "causes-llm"]
    )
    _check(r)
    assert r["judges"]["keyword"]["retrieval_misses"] is None  # not a claim-checking judge
    # 4 claims calls; one attribution call per case whose retrieval missed a reference (en-miss, zh-miss)
    assert model.request_count == 6
    attribution = [q.user_text for q in model.requests if '"verdicts"' in q.user_text]
    assert len(attribution) == 2
    assert any("<<<陈述" in t for t in attribution)
    assert any("<<<CLAIMS" in t for t in attribution)
    stored = _json(["runs", "show", "causes-llm"])  # the report as stored in PostgreSQL
    _check(stored)
    text = CliRunner().invoke(app, ["runs", "show", "causes-llm"])
    assert "unsupported claims: 2 retrieval misses  3 generation errors" in text.stdout


def test_report_counts_causes_offline(db: str, tmp_path: Path) -> None:
    r = _json(["replay", str(_test_set(tmp_path)), "--judges", "faithfulness", "--run-id", "causes-offline"])
    _check(r)
    assert r["judges"]["faithfulness"]["pass"] == 1
