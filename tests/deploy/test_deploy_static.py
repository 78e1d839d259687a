"""Static checks of deploy/: YAML parses, env vars are real settings, ports match, k8s objects validate."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from ragpulse.config import Settings, known_env_vars, load_settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S_VERSION = "1.30.0"
#: Ports ragpulse listens on by default: OTLP/gRPC, OTLP/HTTP, health+metrics.
DEFAULT_PORTS = {
    "otlp_grpc_address": 4317,
    "otlp_http_address": 4318,
    "http_address": 9464,
}
ALLOWED_OTHER = {"PYTHONUNBUFFERED", "RAGPULSE_CONFIG"}
#: The portal's port: exposed by the image, on loopback unless set on purpose (tests/deploy/test_deploy_portal.py).
PORTAL_PORT = 9470


def _is_setting(name: str) -> bool:
    if name in ALLOWED_OTHER or name.startswith(("OTEL_", "OPENAI_")):
        return True
    if not name.startswith("RAGPULSE_"):
        return False
    return name in known_env_vars()


def _k8s_docs() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for f in sorted((DEPLOY / "k8s").glob("*.yaml")):
        docs.extend(d for d in yaml.safe_load_all(f.read_text()) if d)
    return docs


def _ragpulse_containers(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for d in docs:
        if d["kind"] == "Deployment":
            for c in d["spec"]["template"]["spec"]["containers"]:
                if c["image"].startswith("ragpulse:"):
                    out.append(c)
    return out


def _container_env(c: dict[str, Any], docs: list[dict[str, Any]]) -> dict[str, str | None]:
    env: dict[str, str | None] = {e["name"]: e.get("value") for e in c.get("env", [])}
    for ref in c.get("envFrom", []):
        name = ref["configMapRef"]["name"]
        cm = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == name)
        env.update(cm["data"])
    return env


def _port(address: str) -> int:
    return int(address.rpartition(":")[2])


def test_dockerfile_env_and_ports() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    env_block = re.search(r"^ENV (.+?)(?=^\S)", text, re.S | re.M)
    assert env_block
    env = dict(re.findall(r"(\w+)=(\S+)", env_block.group(1)))
    assert env
    assert all(_is_setting(k) for k in env), env
    m = re.search(r"^EXPOSE (.+)$", text, re.M)
    assert m is not None
    exposed = {int(p) for p in m.group(1).split()}
    assert exposed == set(DEFAULT_PORTS.values()) | {PORTAL_PORT}
    assert _port(Settings().api.address) == PORTAL_PORT
    for field, port in DEFAULT_PORTS.items():
        assert _port(env[f"RAGPULSE_{field.upper()}"]) == port
        section, _, key = field.partition("_")
        assert _port(getattr(getattr(Settings(), section), key)) == port  # the defaults agree
    assert 'ENTRYPOINT ["ragpulse"]' in text
    assert 'CMD ["serve"]' in text
    assert "/healthz" in text


def test_compose_services_env_and_ports() -> None:
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    services = compose["services"]
    assert set(services) == {"kafka", "postgres", "ragpulse", "prometheus", "grafana"}
    for name, svc in services.items():
        assert re.match(r"^[\w./-]+:[\w.-]+$", svc["image"]), name  # pinned tags
    rp = services["ragpulse"]
    assert rp["build"]["dockerfile"] == "deploy/Dockerfile"
    assert (DEPLOY / ".." / rp["build"]["context"]).exists()
    env = rp["environment"]
    unknown = [k for k in env if not _is_setting(k)]
    assert unknown == []
    s = load_settings(environ={k: str(v) for k, v in env.items() if k.startswith("RAGPULSE_")})
    assert s.kafka.bootstrap_servers == "kafka:9092"
    assert s.kafka.topics == ["rag-traces"]
    host_ports = {int(p.split(":")[1]) for p in rp["ports"]}
    assert (
        host_ports
        == {_port(env[f"RAGPULSE_{f.upper()}"]) for f in [*DEFAULT_PORTS, "api_address"]}
        == set(DEFAULT_PORTS.values()) | {PORTAL_PORT}
    )
    # Kafka's in-network listener is what ragpulse uses; PostgreSQL URL points at the compose service.
    assert "PLAINTEXT://kafka:9092" in services["kafka"]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
    assert "@postgres:5432/" in env["RAGPULSE_STORE_DATABASE_URL"]
    prom = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    assert prom["scrape_configs"][0]["static_configs"][0]["targets"] == ["ragpulse:9464"]
    assert prom["scrape_configs"][0]["metrics_path"] == "/metrics"
    assert "alerts.yml" in prom["rule_files"]
    vols = services["prometheus"]["volumes"]
    assert any(v.startswith("./prometheus:/etc/prometheus") for v in vols)
    for v in services["grafana"]["volumes"]:
        assert (DEPLOY / v.split(":")[0]).exists(), v
    dash = yaml.safe_load((DEPLOY / "grafana" / "provisioning" / "dashboards" / "ragpulse.yml").read_text())
    assert dash["providers"][0]["options"]["path"] == "/var/lib/grafana/dashboards"
    assert (ROOT / "dashboards" / "ragpulse.json").exists()
    ds = yaml.safe_load((DEPLOY / "grafana" / "provisioning" / "datasources" / "prometheus.yml").read_text())
    assert ds["datasources"][0]["url"] == "http://prometheus:9090"


@pytest.mark.parametrize("doc", _k8s_docs(), ids=lambda d: f"{d['kind']}-{d['metadata']['name']}")
def test_k8s_objects_validate_against_schema(doc: dict[str, Any]) -> None:
    kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_k8s_ragpulse_env_ports_and_probes() -> None:
    docs = _k8s_docs()
    containers = _ragpulse_containers(docs)
    assert len(containers) == 2  # sidecar + standalone consumer
    for c in containers:
        env = _container_env(c, docs)
        assert [k for k in env if not _is_setting(k)] == []
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        assert ports["metrics"] == _port(env["RAGPULSE_HTTP_ADDRESS"] or "") == 9464
        assert env["RAGPULSE_HTTP_ADDRESS"] == "0.0.0.0:9464"  # probes reach the pod IP
        assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
        assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
        plain = {k: v for k, v in env.items() if k.startswith("RAGPULSE_") and v is not None}
        load_settings(environ=plain)  # every literal value is valid for its setting
        for field in ("otlp_grpc_address", "otlp_http_address"):
            value = env.get(f"RAGPULSE_{field.upper()}")
            if value:
                assert ports[f"otlp-{field.split('_')[1]}"] == _port(value) == DEFAULT_PORTS[field]


def test_k8s_consumer_is_a_kafka_group_with_replicas_and_otlp_off() -> None:
    docs = _k8s_docs()
    dep = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "ragpulse-consumer")
    assert dep["spec"]["replicas"] >= 2
    env = _container_env(dep["spec"]["template"]["spec"]["containers"][0], docs)
    s = load_settings(environ={k: v for k, v in env.items() if v is not None})
    assert s.kafka.bootstrap_servers
    assert s.kafka.group_id == "ragpulse"
    assert s.kafka.topics == ["rag-traces"]
    assert s.otlp.grpc_address == ""
    assert s.otlp.http_address == ""
    # Secrets come from a Secret, never from the ConfigMap.
    cm = next(d for d in docs if d["kind"] == "ConfigMap")
    assert not any("PASSWORD" in k or "API_KEY" in k for k in cm["data"])
    grace = dep["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace > Settings().engine.shutdown_deadline_s


def test_k8s_sidecar_app_exports_to_loopback() -> None:
    docs = _k8s_docs()
    dep = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "rag-service")
    containers = {c["name"]: c for c in dep["spec"]["template"]["spec"]["containers"]}
    app_env = {e["name"]: e.get("value") for e in containers["rag-service"]["env"]}
    rp_env = {e["name"]: e.get("value") for e in containers["ragpulse"]["env"]}
    assert app_env["OTEL_EXPORTER_OTLP_ENDPOINT"] == f"http://{rp_env['RAGPULSE_OTLP_HTTP_ADDRESS']}"
    assert app_env["OTEL_SERVICE_NAME"] != rp_env["RAGPULSE_EXPORT_SERVICE_NAME"]  # its spans are not ignored
