"""Generate Grafana-managed alert rules (file provisioning) from ``deploy/prometheus/alerts.yml``.

Writes ``deploy/grafana/provisioning/alerting/ragpulse-alerts.yml``: the same alerts, same PromQL (recording
rules inlined, so the rules work without ragpulse's Prometheus rules loaded), same ``for:``, labels and
annotations. Each rule queries the Prometheus data source with uid ``prometheus`` (A), reduces to the last value
(B) and fires for every series the query returns (C: ``B >= -1``; the queries return only breaching series,
like Prometheus alert expressions). Run ``python deploy/grafana/generate_alerts.py`` after editing alerts.yml;
``tests/export/test_grafana_alerts.py`` fails when the file is stale.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
RULES = HERE.parent / "prometheus" / "alerts.yml"
OUT = HERE / "provisioning" / "alerting" / "ragpulse-alerts.yml"
DATASOURCE_UID = "prometheus"
FOLDER = "ragpulse"


def _slug(name: str) -> str:
    return "ragpulse-" + re.sub(r"(?<!^)(?=[A-Z])", "-", name.removeprefix("Ragpulse")).lower()


def _inline(expr: str, recording: dict[str, str]) -> str:
    for name, body in recording.items():
        expr = re.sub(rf"(?<![\w:]){re.escape(name)}(?![\w:])", f"({body})", expr)
    return expr


def _annotation(text: str) -> str:
    # Prometheus templates use $value; Grafana exposes the reduced value as $values.B.Value.
    return text.replace("$value", "$values.B.Value")


def build() -> dict[str, Any]:
    """The provisioning document as a dict."""
    doc = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    recording = {
        r["record"]: " ".join(r["expr"].split()) for g in doc["groups"] for r in g["rules"] if "record" in r
    }
    groups = []
    for g in doc["groups"]:
        rules = []
        for r in g["rules"]:
            if "alert" not in r:
                continue
            expr = "\n".join(line.rstrip() for line in _inline(r["expr"].strip(), recording).splitlines())
            rules.append(
                {
                    "uid": _slug(r["alert"]),
                    "title": r["alert"],
                    "condition": "C",
                    "data": [
                        {
                            "refId": "A",
                            "relativeTimeRange": {"from": 3600, "to": 0},
                            "datasourceUid": DATASOURCE_UID,
                            "model": {"refId": "A", "expr": expr, "instant": True, "range": False},
                        },
                        {
                            "refId": "B",
                            "datasourceUid": "__expr__",
                            "model": {
                                "refId": "B",
                                "type": "reduce",
                                "expression": "A",
                                "reducer": "last",
                                "settings": {"mode": "dropNN"},
                            },
                        },
                        {
                            "refId": "C",
                            "datasourceUid": "__expr__",
                            "model": {
                                "refId": "C",
                                "type": "threshold",
                                "expression": "B",
                                "conditions": [{"evaluator": {"type": "gt", "params": [-1]}}],
                            },
                        },
                    ],
                    "noDataState": "OK",
                    "execErrState": "Error",
                    "for": r["for"],
                    "labels": dict(r.get("labels", {})),
                    "annotations": {
                        "summary": _annotation(r["annotations"]["summary"]),
                        "description": _annotation(r["annotations"]["description"]),
                        "runbook_url": r["annotations"]["runbook"].split(" ", 1)[0],
                        "runbook": _annotation(r["annotations"]["runbook"]),
                        # Grafana expands $__env{…} in provisioning files: set RAGPULSE_PORTAL_URL for Grafana
                        "portal": r["annotations"]["portal"].replace(
                            "{{ $externalLabels.portal_url }}", "$__env{RAGPULSE_PORTAL_URL}"
                        ),
                    },
                    "isPaused": False,
                }
            )
        if rules:
            groups.append({"orgId": 1, "name": g["name"], "folder": FOLDER, "interval": "1m", "rules": rules})
    return {"apiVersion": 1, "groups": groups}


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str)


def render() -> str:
    """The YAML text exactly as committed."""
    header = (
        "# Generated by deploy/grafana/generate_alerts.py from deploy/prometheus/alerts.yml — do not edit.\n"
    )
    return header + yaml.dump(build(), Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=110)


if __name__ == "__main__":
    OUT.write_text(render(), encoding="utf-8")
    sys.stdout.write(f"wrote {OUT}\n")
