"""promtool checks of deploy/prometheus: rules are valid, rule unit tests pass, the scrape config is valid."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

PROM_DIR = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.usefixtures("promtool")  # skips without promtool; marks the test integration

ALERTS = {
    "RagpulseFaithfulnessPassRateLow",
    "RagpulseFaithfulnessDrop",
    "RagpulseJudgeErrorRateHigh",
    "RagpulseEvaluationLagHigh",
    "RagpulseNoTracesReceived",
    "RagpulseCorrectedPassRateLow",
}


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], cwd=PROM_DIR, capture_output=True, text=True, timeout=120)


def test_every_alert_has_summary_description_runbook_and_for() -> None:
    doc = yaml.safe_load((PROM_DIR / "alerts.yml").read_text(encoding="utf-8"))
    alerts = {r["alert"]: r for g in doc["groups"] for r in g["rules"] if "alert" in r}
    assert set(alerts) == ALERTS
    for name, rule in alerts.items():
        ann = rule["annotations"]
        assert ann["summary"], name
        assert ann["description"], name
        assert ann["runbook"], name
        assert "docs/dashboards-and-alerts.md#" in ann["runbook"], name
        assert rule["for"] in ("15m", "30m"), name
        assert rule["labels"]["severity"] == "warning", name


@needs_promtool
def test_promtool_check_rules() -> None:
    r = _promtool("check", "rules", "alerts.yml")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS: 8 rules found" in r.stdout


@needs_promtool
def test_promtool_rule_unit_tests() -> None:
    # alerts_test.yml fires RagpulseFaithfulnessDrop on a synthetic drop and stays quiet on noise.
    r = _promtool("test", "rules", "alerts_test.yml")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout


@needs_promtool
def test_promtool_check_config() -> None:
    r = _promtool("check", "config", "prometheus.yml")
    assert r.returncode == 0, r.stdout + r.stderr
