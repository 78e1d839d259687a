"""Grafana-managed alert provisioning (deploy/grafana/): current, well-formed, same alerts as Prometheus's."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from .expressions import ALERTS, GRAFANA_ALERTS, ROOT, grafana_alert_exprs, grafana_rules


def test_provisioning_file_is_current() -> None:
    spec = importlib.util.spec_from_file_location(
        "ragpulse_grafana_alerts", ROOT / "deploy" / "grafana" / "generate_alerts.py"
    )
    assert spec is not None
    assert spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = gen
    try:
        spec.loader.exec_module(gen)
    finally:
        sys.modules.pop(spec.name, None)
    assert GRAFANA_ALERTS.read_text(encoding="utf-8") == gen.render(), (
        "run: python deploy/grafana/generate_alerts.py"
    )


def test_same_alerts_as_prometheus() -> None:
    prom = {
        r["alert"]: r for g in yaml.safe_load(ALERTS.read_text(encoding="utf-8"))["groups"] for r in g["rules"] if "alert" in r
    }  # fmt: skip
    rules = grafana_rules()
    assert {r["title"] for r in rules} == set(prom)
    uids = [r["uid"] for r in rules]
    assert len(set(uids)) == len(uids)
    assert all(len(u) <= 40 for u in uids)
    for r in rules:
        p = prom[r["title"]]
        assert r["for"] == p["for"]
        assert r["labels"] == p["labels"]
        refs = {d["refId"] for d in r["data"]}
        assert r["condition"] in refs
        assert refs == {"A", "B", "C"}
        (query,) = [d for d in r["data"] if d["datasourceUid"] != "__expr__"]
        assert query["datasourceUid"] == "prometheus"
        assert query["model"]["instant"] is True
        assert "ragpulse:" not in query["model"]["expr"]  # recording rules inlined
        assert r["annotations"]["runbook_url"].startswith("docs/dashboards-and-alerts.md#")
        assert "$value " not in r["annotations"]["description"]  # Grafana templates use $values.B.Value
        assert r["noDataState"] == "OK"
        assert r["execErrState"] == "Error"


@pytest.mark.usefixtures("promtool")
def test_grafana_queries_parse(tmp_path: Path) -> None:
    rules = {
        "groups": [
            {
                "name": "g",
                "rules": [
                    {"record": f"grafana:q{i}", "expr": e} for i, e in enumerate(grafana_alert_exprs())
                ],
            }
        ]
    }
    f = tmp_path / "grafana_rules.yml"
    f.write_text(yaml.safe_dump(rules), encoding="utf-8")
    r = subprocess.run(["promtool", "check", "rules", str(f)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
