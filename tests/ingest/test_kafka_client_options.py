"""SASL/TLS settings pass through to aiokafka unchanged; misconfiguration is a ConfigError."""

from __future__ import annotations

import ssl

import pytest

from ragpulse.config import Settings, load_settings
from ragpulse.errors import ConfigError
from ragpulse.ingest.kafka_client import client_options, dlq_topic_for


def test_plaintext_defaults() -> None:
    opts = client_options(Settings(kafka_bootstrap_servers="a:9092, b:9093").kafka)
    assert opts == {"bootstrap_servers": ["a:9092", "b:9093"], "security_protocol": "PLAINTEXT"}


def test_sasl_ssl_pass_through(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGPULSE_KAFKA_SASL_PASSWORD", "s3cret")
    s = load_settings(
        kafka_bootstrap_servers="broker:9094",
        kafka_security_protocol="sasl_ssl",
        kafka_sasl_mechanism="scram-sha-512",
        kafka_sasl_username="ragpulse",
    )
    opts = client_options(s.kafka)
    assert opts["security_protocol"] == "SASL_SSL"
    assert opts["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (opts["sasl_plain_username"], opts["sasl_plain_password"]) == ("ragpulse", "s3cret")
    assert isinstance(opts["ssl_context"], ssl.SSLContext)
    assert opts["ssl_context"].verify_mode is ssl.CERT_REQUIRED


def test_misconfiguration_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="kafka_bootstrap_servers"):
        client_options(Settings().kafka)
    with pytest.raises(ConfigError, match="needs kafka_sasl_mechanism"):
        client_options(
            Settings(kafka_bootstrap_servers="b:1", kafka_security_protocol="SASL_PLAINTEXT").kafka
        )


def test_dlq_topic_default_and_override() -> None:
    assert dlq_topic_for(Settings().kafka, "rag-traces") == "rag-traces.dlq"
    assert dlq_topic_for(Settings(kafka_dlq_topic="dead").kafka, "rag-traces") == "dead"
