"""Connection options shared by every Kafka client ragpulse creates (consumer, dead-letter producer, ``send``).

SASL and TLS settings are passed through to aiokafka unchanged:
``kafka_security_protocol`` (``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT``, ``SASL_SSL``),
``kafka_sasl_mechanism`` (``PLAIN``, ``SCRAM-SHA-256``, ``SCRAM-SHA-512``), ``kafka_sasl_username``,
``kafka_sasl_password`` (environment only) and ``kafka_ssl_cafile``.
"""

from __future__ import annotations

from typing import Any

from aiokafka.helpers import create_ssl_context

from ragpulse.config import KafkaSettings
from ragpulse.errors import ConfigError

__all__ = ["client_options", "dlq_topic_for"]


def client_options(settings: KafkaSettings) -> dict[str, Any]:
    """Return aiokafka keyword arguments for the bootstrap servers, security protocol, SASL and TLS.

    Raises:
        ConfigError: ``kafka_bootstrap_servers`` is unset, or SASL is requested without a mechanism.
    """
    if not settings.bootstrap_servers:
        raise ConfigError("kafka_bootstrap_servers is not set (RAGPULSE_KAFKA_BOOTSTRAP_SERVERS)")
    protocol = settings.security_protocol.upper()
    opts: dict[str, Any] = {
        "bootstrap_servers": [s.strip() for s in settings.bootstrap_servers.split(",") if s.strip()],
        "security_protocol": protocol,
    }
    if protocol.startswith("SASL"):
        if not settings.sasl_mechanism:
            raise ConfigError(f"kafka_security_protocol={protocol} needs kafka_sasl_mechanism")
        opts["sasl_mechanism"] = settings.sasl_mechanism.upper()
        opts["sasl_plain_username"] = settings.sasl_username
        if settings.sasl_password is not None:
            opts["sasl_plain_password"] = settings.sasl_password.get_secret_value()
    if protocol in ("SSL", "SASL_SSL"):
        opts["ssl_context"] = create_ssl_context(
            cafile=str(settings.ssl_cafile) if settings.ssl_cafile else None
        )
    return opts


def dlq_topic_for(settings: KafkaSettings, topic: str) -> str:
    """Dead-letter topic for messages from ``topic``: ``kafka_dlq_topic`` if set, else ``<topic>.dlq``."""
    return settings.dlq_topic or f"{topic}.dlq"
