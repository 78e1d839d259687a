"""Checklist judges: rules, rubric items via the scripted judge model, config loading, the two examples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kestrel import CHECKLISTS, kestrel_traces
from ragpulse.config import Settings
from ragpulse.errors import ConfigError
from ragpulse.judges.checklist.judge import ChecklistJudge
from ragpulse.judges.checklist.rules import find_links
from ragpulse.judges.checklist.spec import Checklist, load_checklists
from ragpulse.judges.model.client import LLMClient
from ragpulse.model import Backend, JudgementStatus, Trace
from ragpulse.testing.openai_server import RecordedRequest, ScriptedOpenAIServer


def _examples() -> dict[str, Checklist]:
    return load_checklists(
        {
            "reimbursement_answer": str(CHECKLISTS / "reimbursement_answer.yaml"),
            "order_delay_answer": str(CHECKLISTS / "order_delay_answer.yaml"),
        }
    )


def _cl(**kw: object) -> Checklist:
    base: dict[str, object] = {"name": "c", "version": "1"}
    base.update(kw)
    return Checklist.model_validate(base)


def _t(answer: str, **kw: object) -> Trace:
    return Trace(trace_id="t", question="q", answer=answer, **kw)


# -- rules ---------------------------------------------------------------------------------------------------


async def test_rules_each_kind() -> None:
    cl = _cl(
        items=[
            {"id": "any", "kind": "contains", "any": ["Refund", "退款"]},
            {"id": "all", "kind": "contains", "all": ["30 days", "receipt"]},
            {"id": "none", "kind": "contains", "none": ["guarantee"]},
            {"id": "re", "kind": "regex", "pattern": r"\d+ days"},
            {"id": "link", "kind": "link", "domains": ["help.example.com"]},
            {"id": "len", "kind": "length", "min_chars": 10, "max_chars": 80},
        ]
    )
    j = ChecklistJudge(cl, Settings())
    good = await j.judge(_t("refund within 30 days with a receipt: https://docs.help.example.com/r."))
    assert good.score == 1.0
    assert good.passed is True
    assert good.backend is Backend.HEURISTIC
    bad = await j.judge(
        _t("We guarantee it. See https://evil.example.org/x for the form, no more info here today ok")
    )
    items = {i["id"]: i["passed"] for i in (bad.flags.model_extra or {})["items"]}
    assert items == {"any": False, "all": False, "none": False, "re": False, "link": False, "len": False}
    assert bad.score == 0.0
    assert "link (no link to ['help.example.com']" in bad.reason


def test_find_links_and_subdomains() -> None:
    assert find_links("见 https://Ledgerly.Kestrel.example/claims）提交, and http://a.b/x.") == [
        "ledgerly.kestrel.example",
        "a.b",
    ]


async def test_link_only_allowed_and_lookalike_domains() -> None:
    cl = _cl(items=[{"id": "l", "kind": "link", "domains": ["kestrel.example"], "only_allowed": True}])
    j = ChecklistJudge(cl, Settings())
    assert (await j.judge(_t("https://kestrel.example.evil.com/x"))).score == 0.0
    assert (await j.judge(_t("https://x.kestrel.example and https://other.org"))).score == 0.0
    assert (await j.judge(_t("https://x.kestrel.example/p"))).score == 1.0


async def test_mode_all_and_share_threshold() -> None:
    items = [{"id": "a", "kind": "contains", "any": ["a1"]}, {"id": "b", "kind": "contains", "any": ["b1"]}]
    share = ChecklistJudge(_cl(items=items, mode="share", threshold=0.5), Settings())
    every = ChecklistJudge(_cl(items=items, mode="all", threshold=0.5), Settings())
    s = await share.judge(_t("a1 only"))
    e = await every.judge(_t("a1 only"))
    assert (s.score, s.passed, s.threshold) == (0.5, True, 0.5)
    assert (e.score, e.passed, e.threshold) == (0.5, False, 1.0)


async def test_scope_declared_version_and_shared_rules() -> None:
    cl = _cl(
        items=[{"id": "a", "kind": "contains", "any": ["x"]}],
        apps=["shop"],
        scenarios=["delay"],
        version="7.2",
    )
    j = ChecklistJudge(cl, Settings())
    r = await j.judge(_t("x", app="shop", scenario="delay"))
    assert r.status is JudgementStatus.OK
    assert r.declared_version == "7.2"
    assert r.version == j.version
    other = await j.judge(_t("x", app="shop", scenario="billing"))
    assert other.status is JudgementStatus.SKIPPED
    assert other.reason_code == "not_applicable"
    assert other.declared_version == "7.2"
    assert (await j.judge(_t("", app="shop", scenario="delay"))).reason_code == "no_answer"
    assert (await j.judge(_t("I don't know.", app="shop", scenario="delay"))).reason_code == "abstained"


def test_version_changes_with_definition_not_with_identity() -> None:
    a = ChecklistJudge(_cl(items=[{"id": "a", "kind": "contains", "any": ["x"]}]), Settings())
    b = ChecklistJudge(_cl(items=[{"id": "a", "kind": "contains", "any": ["x"]}]), Settings())
    c = ChecklistJudge(_cl(items=[{"id": "a", "kind": "contains", "any": ["y"]}]), Settings())
    assert a.version == b.version != c.version


async def test_rubric_without_model_or_fallback_is_not_judged() -> None:
    cl = _cl(items=[{"id": "r", "kind": "rubric", "rubric": "polite"}])
    r = await ChecklistJudge(cl, Settings()).judge(_t("hello"))
    assert r.status is JudgementStatus.SKIPPED
    assert r.reason_code == "no_judged_items"
    cl2 = _cl(
        items=[
            {"id": "r", "kind": "rubric", "rubric": "polite"},
            {"id": "k", "kind": "contains", "any": ["hi"]},
        ]
    )
    r2 = await ChecklistJudge(cl2, Settings()).judge(_t("hi"))
    assert r2.score == 1.0
    assert "not judged: r" in r2.reason


def test_invalid_checklists_rejected(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="invalid regex"):
        load_checklists({"c": {"version": "1", "items": [{"id": "a", "kind": "regex", "pattern": "("}]}})
    with pytest.raises(ConfigError, match="no items"):
        load_checklists({"c": {"version": "1", "items": []}})
    with pytest.raises(ConfigError, match="duplicate"):
        load_checklists({"c": {"version": "1", "items": [{"id": "a", "kind": "length", "max_chars": 3}] * 2}})
    with pytest.raises(ConfigError, match="not found"):
        load_checklists({"c": str(tmp_path / "missing.yaml")})
    with pytest.raises(ConfigError, match="must match"):
        load_checklists(
            {"Bad Name": {"version": "1", "items": [{"id": "a", "kind": "length", "max_chars": 3}]}}
        )


def test_checklists_setting_from_config_file(tmp_path: Path) -> None:
    from ragpulse.config import load_settings

    cfg = tmp_path / "ragpulse.yaml"
    (tmp_path / "cl.yaml").write_text(
        "version: 3\nitems:\n  - {id: a, kind: contains, any: [x]}\n", encoding="utf-8"
    )
    cfg.write_text("judge_checklists:\n  mine: cl.yaml\n", encoding="utf-8")
    s = load_settings(cfg)
    cls = load_checklists(s.judge.checklists)  # the loader made the path absolute (the file is beside cfg)
    assert cls["mine"].version == "3"
    assert cls["mine"].items[0].id == "a"


# -- rubric items through the judge model ---------------------------------------------------------------------


async def test_rubric_items_via_scripted_model() -> None:
    cl = _cl(
        items=[
            {"id": "polite", "kind": "rubric", "rubric": "The answer is polite."},
            {"id": "cause", "kind": "rubric", "rubric": "The answer explains the cause."},
            {"id": "k", "kind": "contains", "any": ["order"]},
        ],
        threshold=0.6,
    )

    def responder(req: RecordedRequest) -> str:
        prompt = req.user_text
        if "polite" in prompt:
            return '{"pass": true, "reason": "It thanks the customer."}'
        return 'Sure! {"pass": false, "reason": "No cause is given."}'

    with ScriptedOpenAIServer(prompt_tokens=100, completion_tokens=20) as srv:
        srv.responder = responder
        s = Settings(
            judge_model="judge-m", judge_base_url=srv.base_url, judge_max_retries=0, judge_cache_size=0
        )
        client = LLMClient(s)
        j = ChecklistJudge(cl, s, client=client)
        r = await j.judge(_t("Thanks, your order is on its way."))
        srv.responder = lambda req: "no json here"
        bad = await j.judge(_t("Thanks, your order is on its way."))
        await client.aclose()
    assert r.backend is Backend.LLM
    assert r.model == "judge-m"
    assert r.score == pytest.approx(2 / 3)
    assert r.passed is True
    assert "cause (No cause is given.)" in r.reason
    assert r.prompt_tokens == 200
    assert r.completion_tokens == 40
    assert len(srv.requests) == 4
    assert bad.status is JudgementStatus.ERROR
    assert bad.reason_code == "unparseable"


# -- the two example checklists on the example test set ------------------------------------------------------

EXPECTED_OFFLINE = {
    # reimbursement_answer (mode all): share of 4 items, passed only when all pass
    "reimb-en-01": (1.0, True),
    "reimb-en-02": (0.5, False),  # approval + length; no link, no place to submit
    "reimb-en-03": (0.5, False),  # unfaithful: mentions approval, no link or portal
    "reimb-zh-01": (1.0, True),
    "reimb-zh-02": (0.25, False),  # only 审批; 38 characters is under the 40-character minimum
    # order_delay_answer (share, threshold 0.8, 5 items)
    "delay-en-01": (1.0, True),
    "delay-en-02": (0.4, False),  # expected time + next steps only
    "delay-en-03": (0.0, False),  # invented delivery: none of the items
    "delay-zh-01": (1.0, True),
    "delay-zh-02": (0.4, False),
    "delay-zh-03": (0.0, False),  # off-topic
}


async def test_example_checklists_offline_verdicts_on_kestrel() -> None:
    traces = kestrel_traces()
    judges = {n: ChecklistJudge(c, Settings()) for n, c in _examples().items()}
    got: dict[str, tuple[float | None, bool | None]] = {}
    for tid, t in traces.items():
        for name, j in judges.items():
            r = await j.judge(t)
            if r.status is JudgementStatus.OK:
                assert tid not in got, f"{tid} judged by two checklists"
                got[tid] = (r.score, r.passed)
                assert r.declared_version == "2026.11-1"
                assert r.judge == name
            elif tid == "reimb-zh-03" and name == "reimbursement_answer":
                assert r.reason_code == "abstained"
            else:
                assert r.reason_code == "not_applicable", (tid, name, r.reason)
    assert got == {k: pytest.approx(v) for k, v in EXPECTED_OFFLINE.items()}


async def test_example_order_delay_with_model_rubric() -> None:
    cl = _examples()["order_delay_answer"]
    # the model says the partial answer (delay-en-02) reassures and gives status, but no cause
    verdicts = {"reassures": True, "where the order is": True, "cause": False, "what happens next": True}

    def responder(req: RecordedRequest) -> str:
        prompt = req.user_text
        for key, v in verdicts.items():
            if key in prompt:
                return json.dumps({"pass": v, "reason": key})
        raise AssertionError(prompt)

    with ScriptedOpenAIServer(prompt_tokens=100, completion_tokens=20) as srv:
        srv.responder = responder
        s = Settings(judge_model="m", judge_base_url=srv.base_url, judge_max_retries=0, judge_cache_size=0)
        client = LLMClient(s)
        r = await ChecklistJudge(cl, s, client=client).judge(kestrel_traces()["delay-en-02"])
        await client.aclose()
    assert len(srv.requests) == 4  # one per rubric item; expected_time is a rule
    assert r.score == pytest.approx(0.8)
    assert r.passed is True
    by = {i["id"]: i["by"] for i in (r.flags.model_extra or {})["items"]}
    assert by == {
        "reassurance": "llm",
        "current_status": "llm",
        "expected_time": "rule",
        "cause": "llm",
        "next_steps": "llm",
    }


def test_example_config_checklists_resolve_from_any_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragpulse.config import load_settings
    from ragpulse.judges.registry import build_judges

    example = CHECKLISTS.parent / "ragpulse.example.yaml"
    monkeypatch.chdir(tmp_path)
    s = load_settings(example)
    judges = build_judges(s, ["reimbursement_answer", "order_delay_answer"])
    assert [j.version for j in judges.values()] == [
        ChecklistJudge(c, Settings()).version for c in _examples().values()
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            b"root:*:20228:0:99999:7:::\ndaemon:*:20228:0:99999:7:::\n",
            r"is not a checklist: unknown key\(s\) 2 that",
        ),
        (b"version: 1\ntreshold: 0.5\nitems: []\n", r"is not a checklist: unknown key\(s\) treshold \("),
        (b"just a line of text\n", r"is not a checklist: expected a YAML mapping with version and items$"),
        (b"\xff\xfe\x00", r"is not a checklist: not UTF-8 text$"),
        (b"a: [\nsecret-text", r"is not valid YAML: .* at line \d+, column \d+$"),
    ],
)
def test_a_file_that_is_no_checklist_is_named_without_its_content(
    tmp_path: Path, content: bytes, message: str
) -> None:
    p = tmp_path / "shadow"
    p.write_bytes(content)
    with pytest.raises(ConfigError, match=message) as ei:
        load_checklists({"x": str(p)})
    assert str(p) in str(ei.value)
    assert "root:*" not in str(ei.value)
    assert "just a line" not in str(ei.value)
    assert "secret-text" not in str(ei.value)
