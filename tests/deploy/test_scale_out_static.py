"""Static checks of the scale-out deployment files: the Collector configs that keep a trace on one ragpulse
replica, and the KEDA ScaledObject that scales the consumer group on lag."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from ragpulse.config import Settings

ROOT = Path(__file__).resolve().parents[2]
COLLECTOR = ROOT / "deploy" / "otel-collector"
KEDA = ROOT / "deploy" / "k8s" / "keda" / "scaledobject.yaml"
KEDA_SCHEMA = json.loads((Path(__file__).parent / "keda.schema.json").read_text())
#: The Kafka scaler's metadata keys (KEDA docs, "Apache Kafka" scaler).
KAFKA_SCALER_KEYS = {
    "bootstrapServers", "consumerGroup", "topic", "lagThreshold", "activationLagThreshold",
    "offsetResetPolicy", "allowIdleConsumers", "excludePersistentLag", "scaleToZeroOnInvalidOffset",
    "limitToPartitionsWithLag", "partitionLimitation", "version", "sasl", "tls",
}  # fmt: skip


def _yaml(path: Path) -> dict[str, Any]:
    doc = yaml.safe_load(path.read_text())
    assert isinstance(doc, dict)
    return doc


def test_collector_kafka_exporter_keys_spans_by_trace_id() -> None:
    path = COLLECTOR / "kafka.yaml"
    cfg = _yaml(path)
    kafka = cfg["exporters"]["kafka"]
    assert kafka["partition_traces_by_id"] is True
    topic, encoding = kafka["traces"]["topic"], kafka["traces"]["encoding"]
    assert encoding in ("otlp_proto", "otlp_json")
    # the file tells the operator the matching ragpulse setting, in RAGPULSE_KAFKA_TOPIC_ENCODINGS syntax
    assert f"RAGPULSE_KAFKA_TOPIC_ENCODINGS={topic}={encoding}" in path.read_text()
    pipeline = cfg["service"]["pipelines"]["traces"]
    assert pipeline["exporters"] == ["kafka"]
    assert set(pipeline["receivers"]) <= set(cfg["receivers"])
    assert set(pipeline["processors"]) <= set(cfg["processors"])


def test_collector_load_balancer_routes_by_trace_id_to_ragpulse_grpc() -> None:
    cfg = _yaml(COLLECTOR / "loadbalancing.yaml")
    lb = cfg["exporters"]["loadbalancing"]
    assert lb["routing_key"] == "traceID"
    default_grpc_port = int(Settings().otlp.grpc_address.rsplit(":", 1)[1])
    assert lb["resolver"]["dns"]["port"] == default_grpc_port
    # the token goes in the `authorization` header the ragpulse receivers check, from the environment
    assert lb["protocol"]["otlp"]["headers"]["authorization"] == "Bearer ${env:RAGPULSE_OTLP_TOKEN}"
    assert cfg["service"]["pipelines"]["traces"]["exporters"] == ["loadbalancing"]


def _keda_docs() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(KEDA.read_text()) if d]


@pytest.mark.parametrize("doc", _keda_docs(), ids=lambda d: f"{d['kind']}/{d['metadata']['name']}")
def test_keda_objects_validate_against_schema(doc: dict[str, Any]) -> None:
    jsonschema.validate(doc, KEDA_SCHEMA)


def test_keda_schema_rejects_what_keda_rejects() -> None:
    scaled = next(d for d in _keda_docs() if d["kind"] == "ScaledObject")
    bad = json.loads(json.dumps(scaled))
    bad["spec"]["triggers"][0]["metadata"]["allowIdleConsumers"] = False  # KEDA wants strings
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, KEDA_SCHEMA)
    bad["spec"]["triggers"][0]["metadata"]["allowIdleConsumers"] = "false"
    jsonschema.validate(bad, KEDA_SCHEMA)
    del bad["spec"]["scaleTargetRef"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, KEDA_SCHEMA)


def test_keda_scales_the_consumer_deployment_on_its_own_group_and_topic() -> None:
    docs = _keda_docs()
    scaled = next(d for d in docs if d["kind"] == "ScaledObject")
    consumer = [d for d in yaml.safe_load_all((ROOT / "deploy" / "k8s" / "consumer.yaml").read_text()) if d]
    deployment = next(d for d in consumer if d["kind"] == "Deployment")
    config = next(d for d in consumer if d["kind"] == "ConfigMap")["data"]
    assert scaled["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["type"] == "kafka"
    meta = trigger["metadata"]
    assert set(meta) <= KAFKA_SCALER_KEYS
    assert meta["consumerGroup"] == config["RAGPULSE_KAFKA_GROUP_ID"]
    assert meta["topic"] in re.split(r"\s*,\s*", config["RAGPULSE_KAFKA_TOPICS"])
    assert meta["bootstrapServers"] == config["RAGPULSE_KAFKA_BOOTSTRAP_SERVERS"]
    auth = next(d for d in docs if d["kind"] == "TriggerAuthentication")
    assert trigger["authenticationRef"]["name"] == auth["metadata"]["name"]
