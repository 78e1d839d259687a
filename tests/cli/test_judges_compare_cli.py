"""``ragpulse judges compare`` on shadow judgements a replay stored in PostgreSQL: JSON, gates, JUnit, labels."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragpulse.cli import app
from ragpulse.config import Settings
from ragpulse.judges.registry import build_judges
from ragpulse.model import TestCase, TestSet
from ragpulse.runs import case_trace_id
from ragpulse.runs.replay import run_replay
from ragpulse.runs.reports import full_report
from ragpulse.store import PostgresStore

runner = CliRunner()
ANSWERS = ["Paris is the capital of France.", "France has a capital.", "Bananas grow in Ecuador."]


async def _replay_with_shadow(pg_url: str) -> dict[str, bool]:
    """Replay 9 cases with a relevancy shadow at threshold 0.99 on every trace; return main passed per trace."""
    settings = Settings(
        store_database_url=pg_url, judge_options={"relevancy": {"shadow": {"threshold": 0.99, "share": 1.0}}}
    )
    ts = TestSet(
        name="cmp",
        cases=tuple(
            TestCase(id=f"c{i}", question="What is the capital of France?", answer=ANSWERS[i % 3])
            for i in range(9)
        ),
    )
    store = await PostgresStore.connect(pg_url, settings.store)
    try:
        report = await full_report(
            store,
            await run_replay(
                ts, judges=build_judges(settings, ["relevancy"]), store=store, settings=settings, run_id="r"
            ),
        )
        assert len(report.cases) == 9
        return {case_trace_id("r", c.case_id): bool(c.judgements["relevancy"].passed) for c in report.cases}
    finally:
        await store.close()


def test_judges_compare_json_gate_junit_and_labels(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RAGPULSE_JUDGE_MODEL", raising=False)
    config = tmp_path / "shadow.yaml"
    config.write_text("judge_options:\n  relevancy:\n    shadow: {threshold: 0.99, share: 1.0}\n", "utf-8")
    monkeypatch.setenv("RAGPULSE_CONFIG", str(config))
    monkeypatch.setenv("RAGPULSE_STORE_DATABASE_URL", pg_url)
    main_passed = asyncio.run(_replay_with_shadow(pg_url))
    labels = tmp_path / "labels.jsonl"
    labels.write_text(
        "".join(json.dumps({"trace_id": t, "label": int(p)}) + "\n" for t, p in main_passed.items())
    )
    res = runner.invoke(app, ["judges", "compare", "relevancy", "--json", "--labels", str(labels)])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    n_pass = sum(main_passed.values())
    assert 0 < n_pass < 9
    assert (out["pairs"], out["scored"], out["labelled"]) == (9, 9, 9)
    # the stricter shadow passes a subset of what the main version passes
    assert out["confusion"]["both_fail"] == 9 - n_pass
    assert out["confusion"]["shadow_only"] == 0
    assert out["confusion"]["both_pass"] + out["confusion"]["main_only"] == n_pass
    assert out["main_label_accuracy"] == 1.0
    assert out["main_pass_rate"] == pytest.approx(n_pass / 9)

    junit = tmp_path / "cmp.xml"
    res = runner.invoke(
        app, ["judges", "compare", "relevancy", "--min", "main_label_accuracy=0.99", "--min", "agreement=1.01",
              "--junit", str(junit), "--labels", str(labels)],
    )  # fmt: skip
    assert res.exit_code == 1, res.output
    assert "BREACHED: agreement" in res.stdout
    assert "ok: main_label_accuracy" in res.stdout
    xml = junit.read_text("utf-8")
    assert xml.count("<testcase") == 2
    assert xml.count("<failure") == 1

    res = runner.invoke(app, ["judges", "compare", "relevancy", "--min", "kapa=0.7"])
    assert res.exit_code == 2
    res = runner.invoke(app, ["judges", "compare", "relevancy", "--since", "yesterday"])
    assert res.exit_code == 2
