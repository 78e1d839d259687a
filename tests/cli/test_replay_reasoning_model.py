"""``ragpulse replay`` with only ``judge.model`` and ``judge.base_url`` set, against a reasoning-era server: it
refuses ``max_tokens`` and any temperature but 1, answers in content blocks with ``reasoning_content`` beside
them and counts reasoning tokens in ``usage.completion_tokens_details`` (issue 24, "Done when")."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragpulse.cli import app
from ragpulse.judges.model.params import PARAMETERS
from ragpulse.testing.openai_server import RecordedRequest, Reply, Responder, ScriptedOpenAIServer

HALUEVAL = Path(__file__).resolve().parents[2] / "examples" / "halueval_qa_sample.jsonl"
_ANSWER_RE = re.compile(r"<<<ANSWER\n(.*?)\nANSWER>>>", re.S)
#: Reasoning tokens of every reply, counted inside completion_tokens (OpenAI's convention).
REASONING = 50


@pytest.fixture
def thinker(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedOpenAIServer]:
    PARAMETERS.forget()
    with ScriptedOpenAIServer() as server:
        monkeypatch.setenv("RAGPULSE_JUDGE_MODEL", "acme-thinker-2")  # no documented family: all learnt
        monkeypatch.setenv("RAGPULSE_JUDGE_BASE_URL", server.base_url)
        yield server
    PARAMETERS.forget()


def _responder(faithful: dict[str, bool]) -> Responder:
    """Relevancy: YES (its reasoning says NO, which must not count); faithfulness: 2 of 2 claims supported for a
    faithful answer, 1 of 2 for a hallucinated one. Answers as Magistral does (thinking + text blocks) with
    ``reasoning_content`` as DeepSeek does; 3 visible completion tokens + 50 reasoning tokens."""

    def respond(req: RecordedRequest) -> Reply:
        m = _ANSWER_RE.search(req.prompt_text)
        answer = m.group(1).strip() if m else ""
        if '"claims"' in req.prompt_text:
            claims = [
                {"claim": "first", "supported": True},
                {"claim": "second", "supported": faithful[answer]},
            ]
            text = json.dumps({"claims": claims})
        else:
            text = "YES\nIt answers the question."
        blocks = ({"type": "thinking", "thinking": "NO, let me check again."}, {"type": "text", "text": text})
        return Reply(
            content_blocks=blocks,
            reasoning_content="First thought: NO.",
            prompt_tokens=100,
            completion_tokens=3 + REASONING,
            reasoning_tokens=REASONING,
        )

    return respond


def test_replay_succeeds_with_only_model_and_base_url(
    db: str, thinker: ScriptedOpenAIServer, tmp_path: Path
) -> None:
    rows = [json.loads(line) for line in HALUEVAL.read_text(encoding="utf-8").splitlines()[:4]]
    sub = tmp_path / "halueval4.jsonl"
    sub.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    thinker.reset(_responder({r["answer"].strip(): bool(r["faithful"]) for r in rows}))
    thinker.refuse("max_tokens")
    thinker.refuse("temperature", allowed=(1,))
    res = CliRunner().invoke(app, ["replay", str(sub), "--judges", "relevancy,faithfulness", "--json"])
    assert res.exit_code == 0, res.output
    r = json.loads(res.stdout)
    faithful = sum(int(x["faithful"]) for x in rows)
    assert r["counts"] == {
        "pass": 4 + faithful,
        "fail": 4 - faithful,
        "error": 0,
        "abstained": 0,
        "skipped": 0,
    }
    assert r["averages"]["relevancy"] == pytest.approx(1.0)
    assert r["averages"]["faithfulness"] == pytest.approx((faithful + (4 - faithful) * 0.5) / 4)
    answered = [q for q in thinker.requests if q.status == 200]
    assert len(answered) == 8
    # The run report counts the reasoning tokens: 53 completion tokens per call.
    assert r["tokens"] == {"prompt": 8 * 100, "completion": 8 * (3 + REASONING)}
    # The reasoning is kept on the judgement: the trace view's flags (and raw_output), never the verdict.
    trace_id = r["cases"][0]["trace_id"]
    doc = json.loads(CliRunner().invoke(app, ["trace", trace_id, "--json"]).stdout)
    by_judge = {j["judge"]: j for j in doc["judgements"]}
    assert by_judge["relevancy"]["score"] == 1.0
    assert by_judge["relevancy"]["flags"]["reasoning"] == "First thought: NO.\nNO, let me check again."
    assert by_judge["relevancy"]["flags"]["reasoning_tokens"] == REASONING
    # Every answered request sent max_completion_tokens and no temperature; each call was refused at most
    # once per parameter (calls in flight together may each meet a refusal before the first one is learnt).
    assert all("max_tokens" not in q.body and "temperature" not in q.body for q in answered)
    refused = [q for q in thinker.requests if q.status == 400]
    assert 2 <= len(refused) <= 2 * 8
    learnt = PARAMETERS.get(thinker.base_url, "acme-thinker-2")
    assert (learnt.token_param, learnt.temperature, learnt.reasoning) == (
        "max_completion_tokens",
        False,
        True,
    )
    # A second run in the same process sends the right request first, with room for reasoning.
    thinker.reset(_responder({r["answer"].strip(): bool(r["faithful"]) for r in rows}))
    thinker.refuse("max_tokens")
    thinker.refuse("temperature", allowed=(1,))
    res = CliRunner().invoke(app, ["replay", str(sub), "--judges", "relevancy,faithfulness", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["counts"] == r["counts"]
    assert [q.status for q in thinker.requests] == [200] * 8
    assert {q.body["max_completion_tokens"] for q in thinker.requests} == {1024 + 8192}
