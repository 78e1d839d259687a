"""``ragpulse gate``: thresholds from --min and config, exit codes, JUnit XML read back with junitparser."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from junitparser import Error, Failure, JUnitXml, Skipped
from typer.testing import CliRunner

from ragpulse.cli import app
from ragpulse.config import Settings
from ragpulse.judges.frame import error, ok, skipped
from ragpulse.model import Backend, Judgement, RunRecord, RunStatus, Trace, TraceOutcome, TraceResult
from ragpulse.runs import CaseResult
from ragpulse.runs.gate import evaluate_gate, gate_thresholds
from ragpulse.runs.junit import junit_xml
from ragpulse.runs.report_model import RunReport
from ragpulse.runs.reports import build_report
from ragpulse.store import open_store

JUDGES = ("faithfulness", "context_precision")


def _j(judge: str, score: float | None, *, status: str = "ok", threshold: float = 0.5) -> Judgement:
    common: dict[str, Any] = {
        "judge": judge,
        "version": "v1",
        "backend": Backend.HEURISTIC,
        "threshold": threshold,
    }
    if status == "error":
        return error(reason="judge_unavailable: HTTP 500", **common)
    if status == "skipped":
        return skipped(reason="abstained", **common)
    assert score is not None
    return ok(score=score, reason=f"{judge} says {score}", **common)


def _case(case_id: str, *judgements: Judgement, outcome: TraceOutcome = TraceOutcome.EVALUATED) -> CaseResult:
    trace = Trace(trace_id=f"t-{case_id}", question="q", answer="a", run_id="run-g", test_case_id=case_id)
    return CaseResult(
        case_id=case_id,
        result=TraceResult(trace=trace, outcome=outcome, judgements=tuple(judgements)),
        judges=JUDGES,
    )


def _report() -> RunReport:
    cases = [
        _case("c1", _j("faithfulness", 1.0), _j("context_precision", 1.0)),
        _case("c2", _j("faithfulness", 0.9), _j("context_precision", 0.8)),
        _case("c3", _j("faithfulness", 0.2), _j("context_precision", 0.9)),  # fails on faithfulness
        _case("c4", _j("faithfulness", 0.8), _j("context_precision", 0.25)),  # fails on precision
        _case("c5", _j("faithfulness", None, status="error"), _j("context_precision", None, status="error")),
        _case(
            "c6", _j("faithfulness", None, status="skipped"), _j("context_precision", None, status="skipped")
        ),
    ]
    return build_report(run_id="run-g", test_set="kestrel_kb", cases=cases, judges=JUDGES, wall_seconds=1.5)


def test_report_numbers_used_by_the_gate() -> None:
    r = _report()
    assert r.pass_rate == pytest.approx(2 / 5, abs=1e-6)  # c6 abstained: left out of the pass rate
    assert r.coverage == pytest.approx(4 / 6, abs=1e-6)
    assert r.averages["faithfulness"] == pytest.approx((1.0 + 0.9 + 0.2 + 0.8) / 4)


def test_evaluate_gate_and_threshold_merging() -> None:
    r = _report()
    ts = gate_thresholds({"pass_rate": 0.9, "faithfulness": 0.5}, ["pass_rate=0.3"], 0.95)
    assert [str(t) for t in ts] == ["pass_rate=0.3", "faithfulness=0.5", "coverage=0.95"]
    res = evaluate_gate(r, ts)
    met = {t.metric: t.met for t in res.thresholds}
    assert met == {"pass_rate": True, "faithfulness": True, "coverage": False}
    assert res.exit_code == 1
    cov = next(t for t in res.thresholds if t.metric == "coverage")
    assert cov.actual == pytest.approx(0.666667)
    assert "0.667 < 0.95" in cov.message
    ok_res = evaluate_gate(r, gate_thresholds({}, ["pass_rate=0.3,coverage=0.6"], 0.95))
    assert ok_res.passed
    assert ok_res.exit_code == 0
    ok_res_thresholds = gate_thresholds({}, ["coverage=0"], 0.95)
    assert evaluate_gate(r.model_copy(update={"status": RunStatus.FAILED}), ok_res_thresholds).passed is False
    assert ok_res_thresholds[0].metric == "coverage"
    # only a run that ran to its end is gated on its numbers (an interrupted one covers part of its test set)
    verdicts = {
        status: evaluate_gate(r.model_copy(update={"status": status}), ok_res_thresholds).passed
        for status in RunStatus
    }
    assert verdicts == {
        RunStatus.RUNNING: False,
        RunStatus.COMPLETED: True,
        RunStatus.COMPLETED_WITH_ERRORS: True,
        RunStatus.FAILED: False,
        RunStatus.QUEUED: False,
        RunStatus.CANCELLED: False,
        RunStatus.INTERRUPTED: False,
    }
    # a judge that never scored has no mean: breached, never silently passed
    missing = evaluate_gate(r, gate_thresholds({}, ["relevancy=0.1"], 0.0))
    assert not missing.passed
    assert missing.thresholds[0].actual is None


def test_junit_xml_one_testcase_per_case(tmp_path: Path) -> None:
    r = _report()
    res = evaluate_gate(r, gate_thresholds({}, ["pass_rate=0.5", "faithfulness=0.5"], 0.5))
    import xml.etree.ElementTree as ET

    path = tmp_path / "g.xml"
    ET.ElementTree(junit_xml(r, res.thresholds)).write(path, encoding="utf-8", xml_declaration=True)
    xml = JUnitXml.fromfile(str(path))
    suites = {s.name: s for s in xml}
    cases = {c.name: c for c in suites["ragpulse.kestrel_kb"]}
    assert list(cases) == ["c1", "c2", "c3", "c4", "c5", "c6"]
    kinds = {n: type(c.result[0]).__name__ if c.result else "pass" for n, c in cases.items()}
    assert kinds == {
        "c1": "pass",
        "c2": "pass",
        "c3": "Failure",
        "c4": "Failure",
        "c5": "Error",
        "c6": "Skipped",
    }
    assert "faithfulness" in cases["c3"].result[0].message
    assert "faithfulness: 0.200 fail" in cases["c3"].result[0].text
    assert isinstance(cases["c5"].result[0], Error)
    assert isinstance(cases["c6"].result[0], Skipped)
    th = {c.name: c for c in suites["ragpulse.thresholds"]}
    assert set(th) == {"pass_rate>=0.5", "faithfulness>=0.5", "coverage>=0.5"}
    assert isinstance(th["pass_rate>=0.5"].result[0], Failure)
    assert not th["faithfulness>=0.5"].result
    s = suites["ragpulse.kestrel_kb"]
    assert (s.tests, s.failures, s.errors, s.skipped) == (6, 2, 1, 1)


# -- the command, on a run stored in a private PostgreSQL database ---------------------------------------------


async def _store_run(url: str, report: RunReport, run_id: str = "run-g") -> None:
    async with open_store(Settings(store_database_url=url).store) as store:
        await store.create_run(
            RunRecord(run_id=run_id, test_set="kestrel_kb", judges=dict.fromkeys(JUDGES, "v1"))
        )
        await store.finish_run(run_id, RunStatus.COMPLETED_WITH_ERRORS, report.to_json())


def test_gate_command_exit_codes_and_junit(pg_url: str, tmp_path: Path) -> None:
    asyncio.run(_store_run(pg_url, _report()))
    runner = CliRunner()
    env = {"RAGPULSE_STORE_DATABASE_URL": pg_url, "RAGPULSE_CONFIG": ""}
    xml_path = tmp_path / "out" / "junit.xml"
    res = runner.invoke(
        app,
        ["gate", "run-g", "--min", "pass_rate=0.8", "--min", "faithfulness=0.5", "--junit", str(xml_path)],
        env=env,
    )
    assert res.exit_code == 1, res.output
    assert "FAILED" in res.output
    assert "c3" in res.output
    xml = JUnitXml.fromfile(str(xml_path))
    failing = sorted(c.name for s in xml for c in s if c.result and isinstance(c.result[0], Failure))
    assert failing == ["c3", "c4", "coverage>=0.95", "pass_rate>=0.8"]

    ok_res = runner.invoke(app, ["gate", "run-g", "--min", "pass_rate=0.3,coverage=0.6", "--json"], env=env)
    assert ok_res.exit_code == 0, ok_res.output
    out = json.loads(ok_res.output)
    assert out["passed"] is True
    assert [f["case_id"] for f in out["failing_cases"]] == ["c3", "c4"]
    # c5 (judge errors) and c6 (abstained) are not failures: not judged, each with its reasons
    assert out["not_judged_cases"] == [
        {
            "case_id": "c5",
            "reason": "faithfulness: judge_unavailable: HTTP 500; context_precision: judge_unavailable: HTTP 500",
        },
        {"case_id": "c6", "reason": "faithfulness: abstained; context_precision: abstained"},
    ]
    # streamed case by case, yet the same text as one json.dumps of the whole object, on one line
    assert ok_res.output == json.dumps(out, ensure_ascii=False) + "\n"

    assert runner.invoke(app, ["gate", "nope", "--min", "pass_rate=0.1"], env=env).exit_code == 2
    assert runner.invoke(app, ["gate", "run-g", "--min", "pass_rate=2"], env=env).exit_code == 2
    # a typo in a threshold is a usage error naming it, not a breach
    typo = runner.invoke(app, ["gate", "run-g", "--min", "nosuchjudge=0.5"], env=env)
    assert typo.exit_code == 2
    assert "unknown metric or judge 'nosuchjudge'" in typo.output
    typo2 = runner.invoke(app, ["gate", "run-g", "--min", "pass_rat=0.5"], env=env)
    assert typo2.exit_code == 2
    assert "'pass_rat'" in typo2.output
    # no threshold at all: a usage error, never PASSED on nothing checked
    bare = runner.invoke(app, ["gate", "run-g"], env=env)
    assert bare.exit_code == 2
    assert "no threshold to check" in bare.output


def test_gate_thresholds_from_config_file(pg_url: str, tmp_path: Path) -> None:
    asyncio.run(_store_run(pg_url, _report()))
    cfg = tmp_path / "ragpulse.yaml"
    cfg.write_text("replay_gate_min:\n  context_precision: 0.5\n  coverage: 0.6\n", encoding="utf-8")
    env = {"RAGPULSE_STORE_DATABASE_URL": pg_url}
    runner = CliRunner()
    # mean context precision = (1 + 0.8 + 0.9 + 0.25) / 4 = 0.7375 ≥ 0.5; coverage 0.667 ≥ 0.6
    assert runner.invoke(app, ["--config", str(cfg), "gate", "run-g"], env=env).exit_code == 0
    cfg.write_text("replay_gate_min:\n  context_precision: 0.8\n  coverage: 0.6\n", encoding="utf-8")
    res = runner.invoke(app, ["--config", str(cfg), "gate", "run-g", "--json"], env=env)
    assert res.exit_code == 1
    assert {t["metric"]: t["met"] for t in json.loads(res.output)["thresholds"]} == {
        "context_precision": False,
        "coverage": True,
    }
    # from the environment too (JSON), e.g. in CI
    env_only = {
        "RAGPULSE_STORE_DATABASE_URL": pg_url,
        "RAGPULSE_REPLAY_GATE_MIN": '{"pass_rate": 0.9, "coverage": 0.5}',
    }
    res_env = runner.invoke(app, ["gate", "run-g", "--json"], env=env_only)
    assert res_env.exit_code == 1
    assert {t["metric"]: t["met"] for t in json.loads(res_env.output)["thresholds"]} == {
        "pass_rate": False,
        "coverage": True,
    }
    # the command line wins over the config for the same metric
    assert (
        runner.invoke(
            app, ["--config", str(cfg), "gate", "run-g", "--min", "context_precision=0.7"], env=env
        ).exit_code
        == 0
    )


def test_a_case_with_an_error_judgement_never_passes_and_is_a_junit_error(tmp_path: Path) -> None:
    # The judge model was down for context_precision; faithfulness (no model) still scored and passed.
    cases = [
        _case("ok", _j("faithfulness", 0.9), _j("context_precision", 0.9)),
        _case("half", _j("faithfulness", 0.9), _j("context_precision", None, status="error")),
    ]
    r = build_report(run_id="run-e", test_set="kestrel_kb", cases=cases, judges=JUDGES, wall_seconds=1.0)
    assert r.pass_rate == 0.5
    assert r.coverage == 1.0
    row = {c.case_id: c for c in r.cases}["half"]
    assert row.passed is False
    assert row.scored == 1
    assert row.reason == "context_precision: judge_unavailable: HTTP 500"
    res = evaluate_gate(r, gate_thresholds({}, ["pass_rate=0.8"], 0.5))
    assert res.passed is False
    import xml.etree.ElementTree as ET

    path = tmp_path / "e.xml"
    ET.ElementTree(junit_xml(r, res.thresholds)).write(path, encoding="utf-8", xml_declaration=True)
    suite = {s.name: s for s in JUnitXml.fromfile(str(path))}["ragpulse.kestrel_kb"]
    got = {c.name: type(c.result[0]).__name__ if c.result else "pass" for c in suite}
    assert got == {"ok": "pass", "half": "Error"}
    assert (suite.tests, suite.failures, suite.errors) == (2, 0, 1)
