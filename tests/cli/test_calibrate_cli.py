"""``ragpulse calibrate`` end to end through the typer app (real files, real judges, no model)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragpulse.cli import app
from testsupport import shared_dir

PARIS = "The Eiffel Tower is in Paris. It was completed in 1889."
Q = "Where is the Eiffel Tower?"
# faithfulness scores (hand-computed): 1.0, 0.0, 1/3 (1925 weighs 2, "completed" 1), 1.0
ROWS = [
    {"question": Q, "contexts": [PARIS], "answer": "The Eiffel Tower is in Paris.", "faithful": 1},
    {"question": Q, "contexts": [PARIS], "answer": "The Eiffel Tower is in Rome.", "faithful": "0"},
    {"question": Q, "contexts": PARIS, "answer": "It was completed in 1925.", "faithful": "1"},
    {"question": Q, "contexts": [PARIS], "answer": "It was completed in 1889.", "faithful": 0},
    {"question": Q, "contexts": [PARIS], "answer": "I don't know.", "faithful": 1},
]

runner = CliRunner()


@pytest.fixture
def cases(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("RAGPULSE_JUDGE_MODEL", raising=False)
    monkeypatch.delenv("RAGPULSE_CONFIG", raising=False)
    path = tmp_path / "cases.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in ROWS) + "\n\n", encoding="utf-8")
    return path


def run_json(*args: str) -> dict[str, object]:
    res = runner.invoke(app, ["calibrate", *args, "--json"])
    assert res.exit_code == 0, res.output
    out: dict[str, object] = json.loads(res.stdout)
    return out


def test_calibrate_json(cases: Path) -> None:
    out = run_json(str(cases), "--judge", "faithfulness", "--label", "faithful")
    # threshold 0.65: tp (1.0, 1), tn (0.0, 0), fn (1/3, 1), fp (1.0, 0); the abstention is unscored
    assert out["confusion"] == {"tp": 1, "fp": 1, "tn": 1, "fn": 1}
    assert (out["n"], out["n_unscored"], out["accuracy"], out["balanced_accuracy"], out["f1"]) == (
        4,
        1,
        0.5,
        0.5,
        0.5,
    )
    assert out["backend"] == "heuristic"
    assert out["threshold"] == 0.65
    # ranks of scores [3.5, 1, 2, 3.5] vs labels [3.5, 1.5, 3.5, 1.5] → 1 / sqrt(4.5 · 4)
    assert out["spearman"] == pytest.approx(1 / math.sqrt(18))
    ci = out["balanced_accuracy_ci"]
    assert isinstance(ci, list)
    assert len(ci) == 2
    assert ci[0] <= 0.5 <= ci[1]


def test_calibrate_threshold_and_limit(cases: Path) -> None:
    out = run_json(str(cases), "--judge", "faithfulness", "--label", "faithful", "--threshold", "0.3")
    # 1/3 now passes → tp 2, fn 0: BA = (2/2 + 1/2) / 2
    assert out["confusion"] == {"tp": 2, "fp": 1, "tn": 1, "fn": 0}
    assert out["balanced_accuracy"] == 0.75
    out = run_json(str(cases), "--judge", "faithfulness", "--label", "faithful", "--limit", "2")
    assert out["n"] == 2
    assert out["confusion"] == {"tp": 1, "fp": 0, "tn": 1, "fn": 0}


def test_calibrate_table(cases: Path) -> None:
    res = runner.invoke(app, ["calibrate", str(cases), "--judge", "faithfulness", "--label", "faithful"])
    assert res.exit_code == 0, res.output
    assert "balanced accuracy (95% CI)" in res.stdout
    assert "1 / 1 / 1 / 1" in res.stdout
    assert "abstained" in res.stdout


def test_calibrate_usage_errors(cases: Path, tmp_path: Path) -> None:
    res = runner.invoke(app, ["calibrate", str(cases), "--judge", "nope", "--label", "faithful"])
    assert res.exit_code == 2
    assert "nope" in res.output
    res = runner.invoke(app, ["calibrate", str(cases), "--judge", "faithfulness", "--label", "missing"])
    assert res.exit_code == 2
    assert "no label field 'missing'" in res.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps({"question": "q", "answer": "a", "contexts": [], "y": 3}) + "\n", encoding="utf-8"
    )
    res = runner.invoke(app, ["calibrate", str(bad), "--judge", "faithfulness", "--label", "y"])
    assert res.exit_code == 2
    assert "must be 0 or 1" in res.output
    res = runner.invoke(
        app, ["calibrate", str(tmp_path / "absent.jsonl"), "--judge", "faithfulness", "--label", "y"]
    )
    assert res.exit_code == 2


@pytest.mark.integration  # slow check (200 labelled rows, ~1.4 s CPU): the integration lane, docs/dev/testing.md
def test_calibrate_ares_human(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAGPULSE_JUDGE_MODEL", raising=False)
    path = shared_dir() / "datasets" / "ares_human" / "ares_human.sample.jsonl"
    out = run_json(str(path), "--judge", "faithfulness", "--label", "answer_faithfulness")
    assert out["n"] == 200
    assert out["confusion"] == {"tp": 131, "fp": 1, "tn": 27, "fn": 41}
    assert out["balanced_accuracy"] == pytest.approx(0.8630, abs=1e-4)


@pytest.mark.integration  # slow check (a labelled data set through calibrate, ~1 s CPU): the integration lane, docs/dev/testing.md
def test_calibrate_keyword_with_ground_truth(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAGPULSE_JUDGE_MODEL", raising=False)
    rows = [
        {"question": "Capital?", "contexts": [], "answer": "Delhi", "ground_truth": "Delhi", "ok": 1},
        {"question": "Capital?", "contexts": [], "answer": "Mumbai", "ground_truth": "Delhi", "ok": 0},
        {"question": "首都？", "contexts": [], "answer": "北京", "expected_answer": "北京", "ok": 1},
    ]
    path = tmp_path / "kw.jsonl"
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8")
    out = run_json(str(path), "--judge", "keyword", "--label", "ok")
    assert out["confusion"] == {"tp": 2, "fp": 0, "tn": 1, "fn": 0}
    assert out["balanced_accuracy"] == 1.0


def test_calibrate_bad_rows_are_one_line_errors(tmp_path: Path) -> None:
    rows = {
        "q.jsonl": json.dumps({"question": ["q"], "answer": "a", "contexts": ["c"], "y": 1}),
        "c.jsonl": json.dumps({"question": "q", "answer": "a", "contexts": {"a": 1}, "y": 1}),
        "d.jsonl": "[" * 100_000 + "]" * 100_000,
    }
    expected = {
        "q.jsonl": "line 1: question: Input should be a valid string",
        "c.jsonl": "line 1: contexts must be a list of strings or a string",
        "d.jsonl": "line 1: too_deep: JSON nested deeper than 64 levels",
    }
    for name, line in rows.items():
        p = tmp_path / name
        p.write_text(line + "\n", encoding="utf-8")
        res = runner.invoke(app, ["calibrate", str(p), "--judge", "faithfulness", "--label", "y"])
        assert res.exit_code == 2, res.output
        assert expected[name] in res.output
        assert "Traceback" not in res.output
        assert "errors.pydantic.dev" not in res.output


def test_calibrate_empty_file_is_an_error(tmp_path: Path) -> None:
    for name, text in {"empty.jsonl": "", "blank.jsonl": "\n  \n"}.items():
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        res = runner.invoke(app, ["calibrate", str(path), "--judge", "faithfulness", "--label", "y"])
        assert res.exit_code == 2, res.output
        assert f"{path}: no cases (the file is empty or has only blank lines)" in res.output


def test_calibrate_one_label_class_prints_na(cases: Path, tmp_path: Path) -> None:
    # rows 1 and 3 of ROWS (both faithful): scores 1.0 (tp) and 1/3 (fn) → TPR 0.5, no label 0
    path = tmp_path / "one_class.jsonl"
    path.write_text("\n".join(json.dumps(ROWS[i]) for i in (0, 2)) + "\n", encoding="utf-8")
    res = runner.invoke(app, ["calibrate", str(path), "--judge", "faithfulness", "--label", "faithful"])
    assert res.exit_code == 0, res.output
    assert "warning: only label 1 among the 2 scored cases: balanced accuracy is undefined" in res.stderr
    row = next(line for line in res.stdout.splitlines() if "balanced accuracy" in line)
    assert "n/a" in row
    assert "0.500" not in row
    out = run_json(str(path), "--judge", "faithfulness", "--label", "faithful")
    assert (out["balanced_accuracy"], out["balanced_accuracy_ci"], out["label_counts"]) == (
        None,
        None,
        {"0": 0, "1": 2},
    )
    assert out["confusion"] == {"tp": 1, "fp": 0, "tn": 0, "fn": 1}


def test_calibrate_save_stores_a_profile_and_calibrations_list_shows_it(
    cases: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGPULSE_STORE_DATABASE_URL", pg_url)
    args = ["calibrate", str(cases), "--judge", "faithfulness", "--label", "faithful", "--threshold", "0.5"]
    res = runner.invoke(app, [*args, "--save", "mini"])
    assert res.exit_code == 0, res.output
    # scores 1.0 (label 1), 0.0 (0), 1/3 (1), 1.0 (0); the abstention is skipped: tp = fn = tn = fp = 1
    res = runner.invoke(app, ["calibrations", "list", "--json"])
    assert res.exit_code == 0, res.output
    (profile,) = [json.loads(line) for line in res.stdout.splitlines()]
    assert profile["name"] == "mini"
    assert profile["judge"] == "faithfulness"
    assert (profile["n"], profile["tp"], profile["fn"], profile["tn"], profile["fp"]) == (4, 1, 1, 1, 1)
    assert profile["sensitivity"] == 0.5
    assert profile["specificity"] == 0.5
    # Wilson 95 % interval of 1 of 2: 0.5 ± 0.4055
    assert profile["sensitivity_lower"] == pytest.approx(0.0945, abs=5e-4)
    assert profile["sensitivity_upper"] == pytest.approx(0.9055, abs=5e-4)
    assert profile["threshold"] == 0.5
    assert len(profile["dataset_sha256"]) == 64
    # saving the same name again replaces it; another name adds a second profile, listed first (newest)
    assert runner.invoke(app, [*args, "--save", "mini"]).exit_code == 0
    assert runner.invoke(app, [*args, "--save", "mini-2"]).exit_code == 0
    res = runner.invoke(app, ["calibrations", "list", "--json", "--judge", "faithfulness"])
    assert [json.loads(line)["name"] for line in res.stdout.splitlines()] == ["mini-2", "mini"]
    table = runner.invoke(app, ["calibrations", "list"])
    assert table.exit_code == 0
    assert "mini-2" in table.stdout
    assert runner.invoke(app, ["calibrations", "list", "--json", "--judge", "relevancy"]).stdout == ""


def test_calibrate_save_rejects_a_bad_name(cases: Path) -> None:
    res = runner.invoke(
        app, ["calibrate", str(cases), "--judge", "faithfulness", "--label", "faithful", "--save", "../x"]
    )
    assert res.exit_code == 2
    assert "--save '../x'" in res.output


def test_calibrate_from_reviews_compares_stored_judgements_with_review_labels(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The portal's review labels as the labelled data (issue 31): the judgement each reviewer saw against the
    human verdict, for the judge's current version only; nothing is judged again, ``--save`` is refused."""
    from ragpulse.calibration.calibrate import _current_version
    from ragpulse.config import Settings
    from ragpulse.model import Backend, Judgement, JudgementStatus, Source, Trace, TraceOutcome, TraceResult
    from ragpulse.store.postgres import PostgresStore
    from testsupport import run_async

    monkeypatch.setenv("RAGPULSE_STORE_DATABASE_URL", pg_url)
    monkeypatch.delenv("RAGPULSE_JUDGE_MODEL", raising=False)
    current = run_async(_current_version(Settings(), "faithfulness"))

    def result(i: int, score: float, version: str) -> TraceResult:
        j = Judgement(judge="faithfulness", version=version, backend=Backend.HEURISTIC, score=score,
                      passed=score >= 0.5, threshold=0.5, status=JudgementStatus.OK)  # fmt: skip
        t = Trace(trace_id=f"rv-{i}", question="q?", answer="a.", source=Source.OTLP)
        return TraceResult(trace=t, outcome=TraceOutcome.EVALUATED, judgements=(j,))

    async def setup() -> None:
        store = await PostgresStore.connect(pg_url, Settings(store_pool_max=2).store)
        try:
            await store.write_results([result(i, 0.9 if i < 3 else 0.1, current) for i in range(5)])
            await store.write_results([result(9, 0.9, "old-version")])
            # passed: agree, agree, disagree (tp 2, fp 1); failed: agree, disagree (tn 1, fn 1)
            for i, agree in enumerate([True, True, False, True, False]):
                await store.save_review_label(f"rv-{i}", "faithfulness", current, agree=agree, reviewer="mei")
            await store.save_review_label("rv-9", "faithfulness", "old-version", agree=False, reviewer="mei")
        finally:
            await store.close()

    run_async(setup())
    out = run_json("--judge", "faithfulness", "--from-reviews")
    assert out["confusion"] == {"tp": 2, "fp": 1, "tn": 1, "fn": 1}
    assert out["n"] == 5
    old = run_json("--judge", "faithfulness", "--from-reviews", "--version", "old-version")
    assert old["confusion"] == {"tp": 0, "fp": 1, "tn": 0, "fn": 0}
    refused = runner.invoke(app, ["calibrate", "--judge", "faithfulness", "--from-reviews", "--save", "x"])
    assert refused.exit_code == 2
    assert "already count in the corrected pass rates" in refused.output
    assert runner.invoke(app, ["calibrate", "--judge", "faithfulness"]).exit_code == 2
