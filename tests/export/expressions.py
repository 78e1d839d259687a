"""PromQL expressions of the committed dashboard and alert rules, with Grafana variables substituted."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "dashboards" / "ragpulse.json"
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"

_METRIC = re.compile(r"\b(ragpulse_[a-z0-9_]+)\b")


def substitute(expr: str, *, rate_interval: str = "1m") -> str:
    """Grafana variables → values Prometheus accepts (``All`` = ``.*``)."""
    return (
        expr.replace("$__rate_interval", rate_interval)
        .replace("$judge", ".*")
        .replace("$app", ".*")
        .replace("${datasource}", "")
    )


def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return data


def dashboard_exprs(*, rate_interval: str = "1m") -> list[str]:
    """Every panel target's expression and every query variable's series selector."""
    out: list[str] = []
    d = dashboard()
    for p in d["panels"]:
        for t in p.get("targets") or []:
            out.append(substitute(t["expr"], rate_interval=rate_interval))
    for v in d["templating"]["list"]:
        if v["type"] == "query":
            m = re.fullmatch(r"label_values\((.+), *([a-z_]+)\)", v["query"])
            assert m, v["query"]
            out.append(substitute(m.group(1)))
    return out


def alert_exprs() -> list[str]:
    doc = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))
    return [r["expr"] for g in doc["groups"] for r in g["rules"]]


def metric_names(exprs: list[str]) -> set[str]:
    """``ragpulse_*`` metric names referenced (recording-rule names like ``ragpulse:x`` excluded)."""
    return {m for e in exprs for m in _METRIC.findall(e)}


GRAFANA_ALERTS = ROOT / "deploy" / "grafana" / "provisioning" / "alerting" / "ragpulse-alerts.yml"


def grafana_rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load(GRAFANA_ALERTS.read_text(encoding="utf-8"))
    return [r for g in doc["groups"] for r in g["rules"]]


def grafana_alert_exprs() -> list[str]:
    """The Prometheus queries of the Grafana-managed alert rules."""
    return [
        d["model"]["expr"] for r in grafana_rules() for d in r["data"] if d["datasourceUid"] != "__expr__"
    ]
