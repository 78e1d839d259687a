"""The shipped Dockerfile, compose file and Kubernetes manifests expose the portal on purpose, with a token
(from a Secret in Kubernetes), and keep the sidecar lean; the container default keeps it on loopback."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / "k8s" / name).read_text()) if d]


def test_dockerfile_exposes_the_portal_port_but_keeps_it_on_loopback() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    exposed = re.search(r"^EXPOSE (.+)$", text, re.M)
    assert exposed is not None
    assert "9470" in exposed.group(1).split()
    env_block = re.search(r"^ENV (.+?)(?=^\S)", text, re.S | re.M)
    assert env_block is not None
    assert "RAGPULSE_API_ADDRESS" not in env_block.group(1)  # default 127.0.0.1:9470: starts without a token


def test_compose_exposes_the_portal_with_a_token_on_the_host_loopback() -> None:
    rp = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())["services"]["ragpulse"]
    env = rp["environment"]
    assert env["RAGPULSE_API_ADDRESS"] == "0.0.0.0:9470"
    assert env["RAGPULSE_API_TOKEN"].startswith("${RAGPULSE_API_TOKEN")
    assert "127.0.0.1:9470:9470" in rp["ports"]


def test_k8s_consumer_serves_the_portal_with_the_token_from_a_secret() -> None:
    docs = _docs("consumer.yaml")
    cm = next(d for d in docs if d["kind"] == "ConfigMap")
    assert cm["data"]["RAGPULSE_API_ADDRESS"] == "0.0.0.0:9470"
    assert not any("TOKEN" in k for k in cm["data"])
    dep = next(d for d in docs if d["kind"] == "Deployment")
    c = dep["spec"]["template"]["spec"]["containers"][0]
    token = next(e for e in c["env"] if e["name"] == "RAGPULSE_API_TOKEN")
    assert token["valueFrom"]["secretKeyRef"] == {
        "name": "ragpulse",
        "key": "api-token",
    }  # required: no token, no pod
    assert {"name": "portal", "containerPort": 9470} in c["ports"]
    svc = next(d for d in docs if d["kind"] == "Service")
    assert {"name": "portal", "port": 9470, "targetPort": "portal"} in svc["spec"]["ports"]


def test_k8s_sidecar_has_no_portal() -> None:
    dep = next(d for d in _docs("sidecar.yaml") if d["kind"] == "Deployment")
    rp = next(c for c in dep["spec"]["template"]["spec"]["containers"] if c["image"].startswith("ragpulse:"))
    assert {"name": "RAGPULSE_API_ADDRESS", "value": ""} in rp["env"]
