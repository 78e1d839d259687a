"""Configuration: one YAML file plus ``RAGPULSE_*`` environment variables, grouped into sections.

Precedence, highest first: explicit overrides > environment variables > the YAML file > defaults.

**One naming rule.** Every setting lives in a section (:class:`Settings` has one attribute per section) and has
one name: section ``api``, key ``token`` is ``api: {token: …}`` in the YAML file, the flat YAML key
``api_token`` and the environment variable ``RAGPULSE_API_TOKEN``. Components take their section
(:class:`EngineSettings`, :class:`StoreSettings`, :class:`KafkaSettings`, …), not the whole :class:`Settings`.

**One spelling per setting.** There are no aliases: an unknown key in the YAML file is a
:class:`~ragpulse.errors.ConfigError`, and an unknown ``RAGPULSE_*`` environment variable stops the CLI with an
error naming the closest known one (:func:`check_environment`). The reference of every setting,
``docs/settings.md``, is generated from this module (:func:`settings_reference`) and checked by a test.

Secrets (API keys, passwords, tokens) are read only from the environment; a secret in the YAML file is a
:class:`~ragpulse.errors.ConfigError`. A relative checklist path in the YAML file is resolved against the
file's directory when the file is there, else against the working directory (the one rule for checklist paths;
paths from the environment are relative to the working directory). See ``config/ragpulse.example.yaml``.
"""

from __future__ import annotations

import difflib
import ipaddress
import json
import os
import re
import typing
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from ragpulse.errors import ConfigError
from ragpulse.model import ModelPrice

__all__ = [
    "ApiSettings",
    "EmbeddingsSettings",
    "EngineSettings",
    "ExportSettings",
    "HttpSettings",
    "JudgeModel",
    "JudgeRoute",
    "JudgeSettings",
    "KafkaSettings",
    "LogSettings",
    "OtlpSettings",
    "RagEndpoint",
    "RagSettings",
    "ReplaySettings",
    "SamplingRuleSettings",
    "Settings",
    "StoreSettings",
    "check_environment",
    "closest_env_var",
    "env_name",
    "load_settings",
    "settings_reference",
    "unknown_env_vars",
]

_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True, frozen=True)


def _split_csv(v: Any) -> Any:
    if isinstance(v, str):
        return [p.strip() for p in v.split(",") if p.strip()]
    return v


class JudgeRoute(BaseModel):
    """Which judges run for traces of an app/scenario. ``None`` matches anything; first match wins."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    app: str | None = None
    scenario: str | None = None
    judges: list[str]


class JudgeModel(BaseModel):
    """A named judge model a run may choose (``judge_models``): model name, endpoint, where its key is."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(min_length=1)
    #: OpenAI-compatible base URL; ``None`` = the judge section's ``base_url``.
    base_url: str | None = None
    #: Name of the environment variable holding its API key (the key itself never appears in config).
    api_key_env: str | None = None


class SamplingRuleSettings(BaseModel):
    """A sampling rate (0–1) for the traces of an app and/or scenario (``None`` matches anything); first match
    wins (:mod:`ragpulse.engine.sampling`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    app: str | None = None
    scenario: str | None = None
    rate: float = Field(ge=0.0, le=1.0)


class RagEndpoint(BaseModel):
    """A named RAG endpoint a run may choose (``rag_endpoints``): URL, request/response field names, key."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = Field(min_length=1)
    question_field: str = "question"
    #: Request field for top-k and for the similarity threshold (``None``: not sent).
    top_k_field: str | None = "top_k"
    threshold_field: str | None = "similarity_threshold"
    answer_field: str = "answer"
    contexts_field: str = "contexts"
    doc_ids_field: str = "doc_ids"
    #: Name of the environment variable holding the bearer token (never the token itself).
    api_key_env: str | None = None
    timeout_s: float = Field(default=60.0, gt=0)

    @field_validator("url")
    @classmethod
    def _http(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError(f"must be an http(s) URL, not {v!r}")
        return v


class LogSettings(_Section):
    """Section ``log``."""

    level: str = "INFO"
    #: ``None``: JSON unless stderr is a TTY.
    json_: bool | None = Field(default=None, alias="json")
    #: Put question/answer text in logs (off by default).
    text: bool = False

    model_config = ConfigDict(extra="forbid", validate_default=True, frozen=True, populate_by_name=True)

    @field_validator("level")
    @classmethod
    def _level(cls, v: str) -> str:
        level = v.strip().upper()
        if level not in _LOG_LEVELS:
            raise ValueError(f"must be one of {', '.join(_LOG_LEVELS)}, not {v!r}")
        return level


class JudgeSettings(_Section):
    """Section ``judge``: the judge model, which judges run, their options, routes and checklists."""

    #: OpenAI-compatible base URL, e.g. ``https://api.deepseek.com/v1``; ``None`` = OpenAI's default.
    base_url: str | None = None
    #: Judge model name; unset → the offline ``heuristic`` backend.
    model: str | None = None
    #: Secret (environment only: ``RAGPULSE_JUDGE_API_KEY`` or ``OPENAI_API_KEY``).
    api_key: SecretStr | None = None
    timeout_s: float = Field(default=60.0, gt=0)
    #: Completion-token cap of a judge's reply (a judge's ``max_tokens`` option overrides it).
    max_tokens: int = Field(default=1024, gt=0)
    #: Room for reasoning added to the cap of reasoning models (the documented families of
    #: ``ragpulse.judges.model.params``, and any model whose reply carried reasoning), tokens.
    reasoning_tokens: int = Field(default=8192, ge=0)
    #: Sampling temperature (a judge's ``temperature`` option overrides it); not sent to a model that takes only
    #: its default (learnt from its refusal, docs/llm-judges.md "Tested judge models").
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    #: Structured output: ``auto`` sends each judge's JSON schema as ``response_format`` where the server
    #: takes it (a 400 to it → one retry without, later calls omit it); ``json_schema`` always sends it (a 400
    #: is an error); ``off`` never sends it.
    structured_output: Literal["auto", "json_schema", "off"] = "auto"
    max_retries: int = Field(default=4, ge=0)
    #: Ceiling of judge-model calls in flight (also the connection-pool size). The limit in use adapts
    #: between ``min_concurrency`` and this ceiling (AIMD, docs/llm-judges.md) unless
    #: ``adaptive_concurrency`` is off, when it is fixed at this value.
    max_concurrency: int = Field(default=256, gt=0)
    #: Floor of the adaptive limit (calls in flight while the model answers 429/5xx).
    min_concurrency: int = Field(default=2, gt=0)
    #: Adapt the limit to the model's latency and its 429/5xx answers (``false``: fixed at the ceiling).
    adaptive_concurrency: bool = True
    #: Requests per minute shared by all judges (``None`` = no limit).
    requests_per_minute: int | None = Field(default=None, gt=0)
    #: Retrieved-context budget per judge call, characters; top-ranked chunks are kept first.
    context_budget_chars: int = Field(default=24000, gt=0)
    #: Longest text a judge reads, characters: a longer answer (every judge), question or reference (the judges
    #: that read it, and every text put uncut into a prompt) or retrieved/reference context (heuristic judges;
    #: LLM judges cut those to ``context_budget_chars``) → ``skipped``/``text_too_long``, never judged.
    max_text_chars: int = Field(default=100_000, gt=0)
    #: Prompt language: ``auto`` picks Chinese prompts for Chinese questions.
    language: Literal["auto", "en", "zh"] = "auto"
    #: Earlier turns of a conversation (the trace's ``turns``, oldest dropped first) that relevancy and
    #: faithfulness read with the question, in their prompts and heuristic question terms; ``0`` = none.
    history_turns: int = Field(default=3, ge=0, le=50)
    #: Directory with prompt templates overriding the packaged ones (``<judge>.<lang>.txt``).
    prompts_dir: Path | None = None
    #: Optional daily token budget per judge (prompt + completion); over it → skipped/over_budget.
    daily_token_budget: int | None = Field(default=None, gt=0)
    cache_size: int = Field(default=10000, ge=0)
    #: Use openai's aiohttp transport (lower CPU per call at high concurrency).
    http_transport: Literal["aiohttp", "httpx"] = "aiohttp"
    #: Judges that run by default, in order.
    enabled: list[str] = Field(default_factory=lambda: ["relevancy", "faithfulness", "keyword"])
    #: Per-judge options, e.g. ``{"faithfulness": {"mode": "binary", "threshold": 0.5}}``.
    options: dict[str, dict[str, Any]] = Field(default_factory=dict)
    #: Per app/scenario judge selection; first match wins, else ``enabled``.
    routes: list[JudgeRoute] = Field(default_factory=list)
    #: Business checklists, each a judge named after its key: ``{name: {version, mode, threshold, apps,
    #: scenarios, items}}`` or ``{name: "path/to/checklist.yaml"}``. See
    #: ``docs/reference-metrics.md`` and ``config/checklists/``.
    checklists: dict[str, Any] = Field(default_factory=dict)
    #: Named judge models a run may pick (the portal's "judge model" choice): ``{name: JudgeModel}``.
    models: dict[str, JudgeModel] = Field(default_factory=dict)
    #: API keys of per-judge models (``judge.options.<name>.api_key_env``, also in ``shadow`` and ``cascade.first``),
    #: by environment variable name: filled by :func:`load_settings` from the variables the options name
    #: (secret: never from a file).
    model_keys: dict[str, SecretStr] = Field(default_factory=dict)

    @field_validator("enabled", mode="before")
    @classmethod
    def _csv(cls, v: Any) -> Any:
        return _split_csv(v)

    @field_validator("enabled")
    @classmethod
    def _some_judge(cls, v: list[str]) -> list[str]:
        if not v:  # e.g. RAGPULSE_JUDGE_ENABLED="": every trace would be "evaluated" by nothing
            raise ValueError("must name at least one judge, e.g. relevancy,faithfulness,keyword")
        return v

    @property
    def uses_llm(self) -> bool:
        """True when a judge model is configured (else the heuristic backend is used)."""
        return bool(self.model)


class EmbeddingsSettings(_Section):
    """Section ``embeddings`` (answer-correctness similarity)."""

    base_url: str | None = None
    model: str | None = None
    #: Secret (environment only).
    api_key: SecretStr | None = None


class EngineSettings(_Section):
    """Section ``engine``: queue, workers, store writes, sampling, shutdown."""

    #: Traces waiting for judges; a full queue blocks the source (back-pressure).
    queue_size: int = Field(default=1000, gt=0)
    #: Traces judged concurrently (a ceiling: with LLM judges the judge client's adaptive limit decides how
    #: many model calls are in flight; workers waiting for a slot cost a task each).
    workers: int = Field(default=256, gt=0)
    #: Results written to the store per batch, and the longest wait before a partial batch is written.
    batch_size: int = Field(default=200, gt=0)
    flush_interval_s: float = Field(default=0.2, gt=0)
    #: Store writes in flight at once (each a batch in its own transaction); >1 overlaps database latency.
    writers: int = Field(default=2, gt=0)
    #: Store write attempts before a batch is failed for good in an in-process replay (``serve`` retries a
    #: connection outage without limit: its sources redeliver); first backoff between them in seconds.
    store_retries: int = Field(default=8, ge=1)
    store_backoff_s: float = Field(default=0.5, gt=0)
    #: Share of traces judged, by hash of the trace id (same decision on every replica).
    sampling_rate: float = Field(default=1.0, ge=0.0, le=1.0)
    #: Per app/scenario sampling rates, first match wins; they take precedence over ``sampling_rate``.
    sampling_rules: list[SamplingRuleSettings] = Field(default_factory=list)
    #: Always-judge predicates (``FIELD OP VALUE``, syntax in :mod:`ragpulse.engine.sampling`); a matching
    #: trace is judged whatever the rates.
    always_judge: list[str] = Field(default_factory=list)
    #: Deadline to drain in-flight work on shutdown, seconds.
    shutdown_deadline_s: float = Field(default=30.0, gt=0)


class StoreSettings(_Section):
    """Section ``store``: PostgreSQL, the embedded server, retention, redaction."""

    #: PostgreSQL URL; unset → embedded PostgreSQL under ``embedded_dir``.
    database_url: str | None = None
    #: Data directory of the embedded PostgreSQL (default: the user data dir, ``ragpulse/pgdata``).
    embedded_dir: Path | None = None
    #: Keep the embedded PostgreSQL running after the last ragpulse process exits (faster next start).
    embedded_keep_running: bool = False
    #: How long to keep waiting for the embedded PostgreSQL to start when the library's own 10 s ``pg_ctl``
    #: start timeout expires (a loaded machine), seconds.
    embedded_start_timeout_s: float = Field(default=60.0, gt=0)
    pool_min: int = Field(default=1, ge=0)
    pool_max: int = Field(default=8, gt=0)
    #: Longest time one database statement (and a wait for a pooled connection) may take, seconds.
    command_timeout_s: float = Field(default=60.0, gt=0)
    #: Traces and judgements older than this are pruned (days; ``None`` keeps everything).
    retention_days: float | None = Field(default=None, gt=0)
    #: How often ``serve`` prunes old traces when ``retention_days`` is set, seconds.
    retention_interval_s: float = Field(default=3600.0, gt=0)
    #: Store question/answer/context as SHA-256 hashes and lengths only (judges and exporters honour it too).
    redact_text: bool = False

    @field_validator("database_url")
    @classmethod
    def _postgres_url(cls, v: str | None) -> str | None:
        """A malformed URL is a configuration error at settings load (exit 2), not a store error after
        connect attempts; see :func:`check_database_url`."""
        if v is not None and v.strip():
            check_database_url(v)
        return v


def check_database_url(url: str) -> None:
    """Raise ``ValueError`` naming what is wrong with a PostgreSQL URL (never echoing its password).

    Accepted: ``postgresql://`` or ``postgres://`` URLs as libpq and asyncpg take them — user, password,
    one or more ``host[:port]`` (ports 1–65535; none for a Unix socket given as ``?host=/dir``), database
    and query options. Not checked: that the server exists (that is a connection error, at connect time).
    """
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in ("postgresql", "postgres"):
        raise ValueError("must be a postgresql://user@host:port/database URL (scheme postgresql or postgres)")
    netloc = rest.split("/", 1)[0].split("?", 1)[0]
    hosts = netloc.rpartition("@")[2]
    for part in hosts.split(",") if hosts else ():
        if part.startswith("["):  # [IPv6] or [IPv6]:port
            host, _, tail = part.partition("]")
            host, port = host + "]", tail[1:] if tail.startswith(":") else ""
        else:
            host, _, port = part.partition(":")
        if port and not (port.isdigit() and 0 < int(port) < 65536):
            raise ValueError(f"port {port[:20]!r} of host {host[:100]!r} is not a number from 1 to 65535")


class KafkaSettings(_Section):
    """Section ``kafka``: the Kafka source (and ``send --to kafka``)."""

    bootstrap_servers: str | None = None
    topics: list[str] = Field(default_factory=lambda: ["rag-traces"])
    group_id: str = "ragpulse"
    #: Dead-letter topic for every consumed topic; default ``<topic>.dlq`` per consumed topic.
    dlq_topic: str | None = None
    #: Where a new consumer group starts reading: ``earliest`` (no trace missed) or ``latest``.
    auto_offset_reset: Literal["earliest", "latest"] = "earliest"
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    #: Secret (environment only).
    sasl_password: SecretStr | None = None
    ssl_cafile: Path | None = None
    max_message_bytes: int = Field(default=4 * 1024 * 1024, gt=0)
    #: Encoding per topic (``topic=encoding`` comma list in the environment): ``json`` (ragpulse events, the
    #: default for unlisted topics), ``otlp_proto`` or ``otlp_json`` (the OpenTelemetry Collector's Kafka
    #: exporter). Listed topics are consumed in addition to ``topics``.
    topic_encodings: dict[str, Literal["json", "otlp_proto", "otlp_json"]] = Field(default_factory=dict)
    #: Topic judgements are published to (``None``: not published).
    results_topic: str | None = None

    @field_validator("topics", mode="before")
    @classmethod
    def _csv(cls, v: Any) -> Any:
        return _split_csv(v)

    @field_validator("topic_encodings", mode="before")
    @classmethod
    def _pairs(cls, v: Any) -> Any:
        if not isinstance(v, str):
            return v
        out: dict[str, str] = {}
        for part in (p.strip() for p in v.split(",")):
            if not part:
                continue
            topic, sep, enc = (x.strip() for x in part.partition("="))
            if not sep or not topic or not enc:
                raise ValueError(f"must be comma-separated topic=encoding pairs, not {part!r}")
            out[topic] = enc
        return out


class OtlpSettings(_Section):
    """Section ``otlp``: the OTLP receivers."""

    #: Listen addresses; an empty string turns one off.
    grpc_address: str = "127.0.0.1:4317"
    http_address: str = "127.0.0.1:4318"
    max_request_bytes: int = Field(default=16 * 1024 * 1024, gt=0)
    #: The gRPC receiver closes a connection without calls for this long (GOAWAY; the client reconnects), s.
    grpc_max_connection_idle_s: float = Field(default=300.0, gt=0)
    #: The gRPC receiver ends any connection after this long (GOAWAY, then 30 s for calls in flight), seconds:
    #: no client holds one for ever, and load spreads over replicas again.
    grpc_max_connection_age_s: float = Field(default=3600.0, gt=0)
    #: A trace is complete this long after its root span ended (children may be exported later), seconds.
    root_grace_s: float = Field(default=2.0, ge=0)
    #: A trace without a finished root is judged (flagged incomplete) after this idle time, seconds.
    idle_timeout_s: float = Field(default=30.0, gt=0)
    max_pending_traces: int = Field(default=10000, gt=0)
    #: Overrides of the attribute names the convention mappers read (home-grown instrumentation).
    attributes: dict[str, Any] = Field(default_factory=dict)
    #: Bearer token the receivers require (secret, environment only; ``None``: no authentication).
    token: SecretStr | None = None
    #: TLS certificate and key (PEM files) for both receivers; both or neither.
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None

    @model_validator(mode="after")
    def _tls_pair(self) -> OtlpSettings:
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ValueError("tls_cert_file and tls_key_file must be set together")
        return self


class HttpSettings(_Section):
    """Section ``http``: health, readiness and ``/metrics``; ``allowed_hosts``, ``header_timeout_s`` and
    ``max_connections`` apply to every HTTP listener."""

    address: str = "127.0.0.1:9464"
    #: Host names the ``Host`` header may carry on the portal, OTLP/HTTP and this listener (comma list;
    #: ``*.example.com`` = its subdomains, ``*`` = any), besides loopback names and addresses and, on a
    #: non-loopback bind, any IP literal (:mod:`ragpulse.httpguard`; against DNS rebinding).
    allowed_hosts: list[str] = Field(default_factory=list)
    #: Seconds a new connection has to send its request headers, on every HTTP listener (health, portal,
    #: OTLP/HTTP); later it is closed.
    header_timeout_s: float = Field(default=10.0, gt=0)
    #: Connections each HTTP listener holds at once; beyond it the oldest one still sending headers is closed.
    max_connections: int = Field(default=1000, gt=0)

    @field_validator("allowed_hosts", mode="before")
    @classmethod
    def _csv(cls, v: Any) -> Any:
        return _split_csv(v)


class ExportSettings(_Section):
    """Section ``export``: Prometheus/OTel metrics, evaluation spans and events."""

    #: Distinct ``app`` label values kept; the rest are folded into ``other``.
    metrics_app_label_limit: int = Field(default=50, gt=0)
    pushgateway_url: str | None = None
    #: Also send each judgement as an OpenInference EVALUATOR span (needs OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT).
    evaluation_spans: bool = False
    #: Own service name (OTel resource); OTLP spans from it are ignored so ragpulse never judges itself.
    service_name: str = "ragpulse"
    #: Window of the judge-error-corrected pass rates, seconds.
    corrected_window_s: float = Field(default=3600.0, gt=0)
    #: Seconds between two recomputations of the corrected pass rates (``serve``).
    corrected_interval_s: float = Field(default=60.0, gt=0)
    #: The app's price table: model name → price per 1,000,000 prompt and completion tokens, one currency for
    #: the table, e.g. ``{"gpt-4o-mini": {"prompt": 0.15, "completion": 0.60}}``. Prices the app's own token
    #: usage of each trace (trace API, results stream, ``ragpulse_app_cost_total``); a model missing from it
    #: shows its tokens with no cost (never a cost of 0).
    model_prices: dict[str, ModelPrice] = Field(default_factory=dict)


class ApiSettings(_Section):
    """Section ``api``: the portal's REST API and web UI listener."""

    #: Listen address (``host:port``); empty = off.
    address: str = "127.0.0.1:9470"
    #: Bearer token every ``/api/v1`` call needs (secret, environment only; ``None``: no token).
    token: SecretStr | None = None
    #: Allow the API on a non-loopback address without a token (on purpose only: the API can delete data).
    allow_anonymous: bool = False
    #: Largest accepted upload (test-case import), MiB.
    max_upload_mb: float = Field(default=20, gt=0)
    #: Most cases one stored test set may hold: an import (or add) beyond it answers 422 ``too_many_cases``.
    max_test_set_cases: int = Field(default=100_000, gt=0)
    #: Addresses or networks of the proxies in front of the portal (comma list, e.g. ``10.0.0.0/8``): from
    #: them ``X-Forwarded-For``/``-Proto`` name the client and scheme, and the UI accepts their
    #: ``Authorization: Bearer`` (single sign-on). Empty: the socket's peer is the client.
    trusted_proxies: list[str] = Field(default_factory=list)
    #: Request header naming the reviewer of a review label (e.g. ``X-Forwarded-User``, set by the single-sign-on
    #: proxy), read only from a trusted proxy (``trusted_proxies``); unset or absent: the reviewer types a name.
    reviewer_header: str | None = None
    #: Review queue: a judgement whose score is within this distance of its threshold is "borderline".
    review_borderline: float = Field(default=0.1, ge=0, le=1)
    #: Review queue: the share (0–1) of live traces drawn at random, whatever their verdicts.
    review_sample_share: float = Field(default=0.02, ge=0, le=1)

    @field_validator("trusted_proxies", mode="before")
    @classmethod
    def _csv(cls, v: Any) -> Any:
        return _split_csv(v)

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, v: list[str]) -> list[str]:
        for net in v:
            try:
                ipaddress.ip_network(net, strict=False)
            except ValueError as e:
                raise ValueError(f"{net!r} is not an IP address or network") from e
        return v


class RagSettings(_Section):
    """Section ``rag``: the RAG endpoint that answers test cases without a recorded answer (HTTP POST, JSON)."""

    endpoint_url: str | None = None
    #: Secret (environment only).
    endpoint_api_key: SecretStr | None = None
    request_question_field: str = "question"
    response_answer_field: str = "answer"
    response_contexts_field: str = "contexts"
    response_doc_ids_field: str = "doc_ids"
    endpoint_timeout_s: float = Field(default=60.0, gt=0)
    #: Named endpoints a run may pick (the portal's "RAG endpoint" choice): ``{name: RagEndpoint}``.
    endpoints: dict[str, RagEndpoint] = Field(default_factory=dict)


class ReplaySettings(_Section):
    """Section ``replay``: defaults of ``replay`` and ``gate``."""

    #: ``replay`` without ``--judges``: add ``context_precision``/``context_recall`` to the enabled judges when
    #: the test set can measure retrieval (chunk labels, reference contexts, or expected answers on cases
    #: without answers; see ``ragpulse.judges.selection``).
    auto_retrieval_judges: bool = True
    #: Default ``coverage`` threshold of ``replay --fail-under`` and ``gate``.
    coverage_threshold: float = Field(default=0.95, ge=0.0, le=1.0)
    #: Thresholds for ``ragpulse gate`` (same syntax as ``--min``: ``{"pass_rate": 0.8}``; old ``gate_min``).
    gate_min: dict[str, float] = Field(default_factory=dict)


#: Section name → model. The attribute of :class:`Settings` is the section name.
SECTIONS: dict[str, type[_Section]] = {
    "log": LogSettings,
    "judge": JudgeSettings,
    "embeddings": EmbeddingsSettings,
    "engine": EngineSettings,
    "store": StoreSettings,
    "kafka": KafkaSettings,
    "otlp": OtlpSettings,
    "http": HttpSettings,
    "export": ExportSettings,
    "api": ApiSettings,
    "rag": RagSettings,
    "replay": ReplaySettings,
}


def _field_key(section: str, field: str) -> str:
    info = SECTIONS[section].model_fields[field]
    return info.alias or field


#: Every flat name (``section_key``) → (section, field name).
FLAT_NAMES: dict[str, tuple[str, str]] = {
    f"{sec}_{_field_key(sec, f)}": (sec, f) for sec, model in SECTIONS.items() for f in model.model_fields
}

#: Settings that may come only from the environment.
SECRETS = frozenset(
    {
        ("judge", "api_key"),
        ("judge", "model_keys"),
        ("embeddings", "api_key"),
        ("kafka", "sasl_password"),
        ("rag", "endpoint_api_key"),
        ("otlp", "token"),
        ("api", "token"),
    }
)

#: Other environment variables read for a setting (after its own names).
_EXTRA_ENV: dict[tuple[str, str], tuple[str, ...]] = {("judge", "api_key"): ("OPENAI_API_KEY",)}


def env_name(section: str, key: str) -> str:
    """The environment variable of setting ``section.key``: ``RAGPULSE_<SECTION>_<KEY>``."""
    return f"RAGPULSE_{section}_{key}".upper()


def _env_names(section: str, field: str) -> list[str]:
    """Every environment variable of a setting, the canonical one first."""
    return [env_name(section, _field_key(section, field)), *_EXTRA_ENV.get((section, field), ())]


def _env_is_json(section: str, field: str) -> bool:
    """Complex values come as JSON in the environment, except the comma lists."""
    if (section, field) in {
        ("judge", "enabled"),
        ("kafka", "topics"),
        ("kafka", "topic_encodings"),
        ("http", "allowed_hosts"),
        ("api", "trusted_proxies"),
    }:
        return False
    origin = typing.get_origin(SECTIONS[section].model_fields[field].annotation)
    return origin in (dict, list)


def _read_env(
    environ: Mapping[str, str], origin: dict[tuple[str, str], str] | None = None
) -> dict[str, dict[str, Any]]:
    """The settings given in ``environ`` as ``{section: {field: raw value}}``; ``origin`` records which variable
    supplied each (for error messages)."""
    env = {k.upper(): v for k, v in environ.items()}
    out: dict[str, dict[str, Any]] = {}
    for section, model in SECTIONS.items():
        for field in model.model_fields:
            for name in _env_names(section, field):
                if name not in env:
                    continue
                raw: Any = env[name]
                if _env_is_json(section, field):
                    try:
                        raw = json.loads(raw)
                    except json.JSONDecodeError as e:
                        raise ConfigError(f"invalid configuration: {name} must be JSON ({e})") from e
                out.setdefault(section, {})[field] = raw
                if origin is not None:
                    origin[(section, field)] = name
                break
    return out


def _beside(value: Any, base: Path) -> Any:
    """A relative file path in the config file that exists next to it, made absolute (checklist files)."""
    if isinstance(value, str) and not Path(value).is_absolute() and (base / value).is_file():
        return str((base / value).resolve())
    return value


def _unknown_key(where: str, key: str) -> ConfigError:
    """An unknown setting key in ``where``, with the closest known key (``section.key`` or flat) when one is
    close (``difflib`` ratio ≥ 0.6)."""
    known = sorted(
        {*FLAT_NAMES, *(f"{s}.{_field_key(s, f)}" for s, m in SECTIONS.items() for f in m.model_fields)}
    )
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]}?" if close else " (docs/settings.md lists every setting)"
    return ConfigError(f"{where}: unknown setting(s) {key}{hint}")


def _put(
    out: dict[str, dict[str, Any]],
    flat: str,
    value: Any,
    where: str,
    origin: dict[tuple[str, str], str] | None = None,
) -> None:
    target = FLAT_NAMES.get(flat)
    if target is None:
        raise _unknown_key(where, flat)
    out.setdefault(target[0], {})[target[1]] = value
    if origin is not None:
        origin[target] = f"{flat} in {where}"


#: A top-level key of a config file that may be a setting name (shown in errors); others are counted only.
_KEY_LIKE = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")


def _read_yaml(path: Path, origin: dict[tuple[str, str], str] | None = None) -> dict[str, dict[str, Any]]:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except FileNotFoundError as e:
        raise ConfigError(f"config file not found: {path}") from e
    except UnicodeDecodeError as e:
        raise ConfigError(f"config file {path} is not UTF-8 text (byte {e.start}): is it a YAML file?") from e
    except RecursionError as e:
        raise ConfigError(f"config file {path} nests too deeply to be a configuration") from e
    except yaml.YAMLError as e:  # where, not the text: the file may be another one than meant
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ConfigError(
            f"config file {path} is not valid YAML: {getattr(e, 'problem', None) or type(e).__name__}{at}"
        ) from e
    except OSError as e:  # a directory, no permission …
        raise ConfigError(f"config file {path} cannot be read: {e.strerror or type(e).__name__}") from e
    if not isinstance(raw, dict):
        raise ConfigError(f"config file {path} must hold a mapping at the top level")
    where = f"config file {path}"
    odd = [k for k in raw if not _KEY_LIKE.match(str(k))]
    if odd:  # not a setting name: counted, never echoed (--config /etc/shadow must not print its lines)
        raise ConfigError(
            f"{where} is not a ragpulse configuration: {len(odd)} key(s) that are not setting names "
            "(docs/settings.md lists every setting)"
        )
    out: dict[str, dict[str, Any]] = {}
    for key, value in raw.items():
        k = str(key).replace("-", "_")
        if k in SECTIONS and isinstance(value, dict):
            fields = SECTIONS[k].model_fields
            for sub, sv in value.items():
                s = str(sub).replace("-", "_")
                field = next((f for f in fields if _field_key(k, f) == s), None)
                if field is None:
                    raise _unknown_key(where, f"{k}.{s}")
                else:
                    out.setdefault(k, {})[field] = sv
                    if origin is not None:
                        origin[(k, field)] = f"{k}.{s} in {where}"
        elif k in FLAT_NAMES:
            _put(out, k, value, where, origin)
        else:
            raise _unknown_key(where, k)
    secrets = sorted(f"{sec}.{f}" for sec, fields in out.items() for f in fields if (sec, f) in SECRETS)
    if secrets:
        sec, f = secrets[0].split(".")
        raise ConfigError(
            f"{where}: {', '.join(secrets)} must come from the environment ({env_name(sec, f)}), never from a file"
        )
    checklists = out.get("judge", {}).get("checklists")
    if isinstance(checklists, dict):
        out["judge"]["checklists"] = {k: _beside(v, path.parent) for k, v in checklists.items()}
    return out


class Settings(BaseModel):
    """Every ragpulse setting, one attribute per section (see the module docstring for the naming rule).

    ``Settings()`` is the defaults only (no environment, no file): :func:`load_settings` reads those. Flat names
    are accepted as keyword arguments too (``Settings(judge_model="m", engine_sampling_rate=0.5)``), for tests and
    overrides.
    """

    model_config = ConfigDict(frozen=True)

    log: LogSettings = Field(default_factory=LogSettings)
    judge: JudgeSettings = Field(default_factory=JudgeSettings)
    embeddings: EmbeddingsSettings = Field(default_factory=EmbeddingsSettings)
    engine: EngineSettings = Field(default_factory=EngineSettings)
    store: StoreSettings = Field(default_factory=StoreSettings)
    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    otlp: OtlpSettings = Field(default_factory=OtlpSettings)
    http: HttpSettings = Field(default_factory=HttpSettings)
    export: ExportSettings = Field(default_factory=ExportSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    rag: RagSettings = Field(default_factory=RagSettings)
    replay: ReplaySettings = Field(default_factory=ReplaySettings)

    @model_validator(mode="before")
    @classmethod
    def _sections(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        out: dict[str, Any] = {}
        flat: dict[str, dict[str, Any]] = {}
        for key, value in data.items():
            if key in SECTIONS:
                out[key] = value
            elif key in FLAT_NAMES:
                sec, f = FLAT_NAMES[key]
                flat.setdefault(sec, {})[f] = value
            else:
                raise ValueError(f"unknown setting {key!r}")
        for sec, fields in flat.items():
            base = out.get(sec, {})
            if isinstance(base, BaseModel):
                base = _set_fields(base)
            out[sec] = {**base, **fields}
        return out

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Settings:
        """Like pydantic's, but an ``update`` key must be a section name (a flat name such as
        ``sampling_rate`` would be set silently on nothing): use :meth:`replaced` for flat names."""
        unknown = sorted(set(update or ()) - set(SECTIONS))
        if unknown:
            raise TypeError(
                f"Settings.model_copy: {', '.join(unknown)} is not a section; use Settings.replaced()"
            )
        return super().model_copy(update=update, deep=deep)

    def replaced(self, **flat: Any) -> Settings:
        """A copy with some settings replaced (flat names, e.g. ``replaced(sampling_rate=1.0)``), re-validated."""
        return Settings(**{**_set_sections(self), **flat})


def _set_fields(model: BaseModel) -> dict[str, Any]:
    return {f: getattr(model, f) for f in model.model_fields_set}


def _set_sections(s: Settings) -> dict[str, Any]:
    return {sec: _set_fields(getattr(s, sec)) for sec in SECTIONS}


def _merge(*layers: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for layer in layers:
        for sec, fields in layer.items():
            out.setdefault(sec, {}).update(fields)
    return out


def _flat_overrides(overrides: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for k, v in overrides.items():
        _put(out, k, v, "override")
    return out


def _location(loc: tuple[int | str, ...], origin: Mapping[tuple[str, str], str]) -> str:
    """``section.key (VARIABLE)`` for a validation error, naming the environment variable that was used."""
    parts = [str(p) for p in loc]
    if len(parts) >= 2 and parts[0] in SECTIONS:
        sec = parts[0]
        field = next((f for f in SECTIONS[sec].model_fields if _field_key(sec, f) == parts[1]), parts[1])
        var = origin.get((sec, field), env_name(sec, _field_key(sec, field)))
        return f"{sec}.{'.'.join(parts[1:])} ({var})"
    return ".".join(parts)


#: Why an ``api_key`` in judge options is refused (said without echoing the value: it is a secret); also used by
#: :func:`ragpulse.judges.options.parse_options` for options given to ``Settings`` directly.
API_KEY_IN_OPTIONS = (
    "a key never goes in the configuration; name the environment variable that holds it in api_key_env"
)


def _option_items(options: Any, at: str = "judge.options") -> Iterator[tuple[str, str, Any]]:
    """``(path, key, value)`` of every key in judge options, at any depth (a judge's, its shadow's, its cascade's
    first stage's): ``("judge.options.faithfulness.shadow", "api_key_env", "SMALL_KEY")``."""
    if isinstance(options, Mapping):
        for k, v in options.items():
            yield at, str(k), v
            yield from _option_items(v, f"{at}.{k}")


def load_settings(
    config_path: str | Path | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    **overrides: Any,
) -> Settings:
    """Build :class:`Settings` from ``config_path`` (or ``RAGPULSE_CONFIG``), the environment and overrides.

    Args:
        config_path: the YAML file; ``None`` → ``RAGPULSE_CONFIG`` when set, else no file.
        environ: the environment to read (default ``os.environ``).
        overrides: flat setting names (``judge_model="m"``, ``sampling_rate=1.0``), highest precedence.

    Raises:
        ConfigError: the file is missing or invalid, holds a secret (also an ``api_key`` in a judge's options:
            the message names its path, never its value), or a value fails validation. An ``api_key_env``
            variable that is not set is an error only when that judge is built (``build_judges``): a judge
            configured but not enabled, and commands that build no judge, do not need it.
    """
    env = os.environ if environ is None else environ
    path = config_path or env.get("RAGPULSE_CONFIG") or None
    origin: dict[tuple[str, str], str] = {}
    file_layer = _read_yaml(Path(path), origin) if path else {}
    data = _merge(file_layer, _read_env(env, origin), _flat_overrides(overrides))
    items = list(_option_items(data.get("judge", {}).get("options")))
    keys = [f"{at}.api_key" for at, k, _ in items if k == "api_key"]
    if keys:
        raise ConfigError(
            "invalid configuration:\n" + "\n".join(f"  {k}: {API_KEY_IN_OPTIONS}" for k in keys)
        )
    named = sorted({v for _, k, v in items if k == "api_key_env" and isinstance(v, str)})
    found = {n: env[n] for n in named if env.get(n)}
    if found:
        judge = data.setdefault("judge", {})
        judge["model_keys"] = {**found, **(judge.get("model_keys") or {})}
    try:
        return Settings(**data)
    except ValidationError as e:
        lines = [f"  {_location(err['loc'], origin)}: {err['msg']}" for err in e.errors()]
        raise ConfigError("invalid configuration:\n" + "\n".join(lines)) from e


#: ``RAGPULSE_*`` variables that are not settings but are read elsewhere: the config file path (CLI), the
#: portal's URL as clients reach it (Grafana-managed alerts' links, examples/evaluate_loop.py; set beside the
#: settings in one environment), the test suite's own variables (docs/dev/testing.md) and the benchmarks'
#: source switch (bench/README.md).
NON_SETTING_ENV = frozenset(
    {
        "RAGPULSE_CONFIG",
        "RAGPULSE_PORTAL_URL",
        "RAGPULSE_SHARED_DIR",
        "RAGPULSE_TEST_PG_ADMIN_URL",
        "RAGPULSE_BENCH_SRC",
    }
)


def known_env_vars() -> frozenset[str]:
    """Every ``RAGPULSE_*`` environment variable ragpulse reads (the settings and :data:`NON_SETTING_ENV`)."""
    names = {f"RAGPULSE_{flat}".upper() for flat in FLAT_NAMES}
    return frozenset(names | NON_SETTING_ENV)


def unknown_env_vars(environ: Mapping[str, str] | None = None) -> list[str]:
    """``RAGPULSE_*`` environment variables that name no setting (likely typos), sorted.

    Matching is case-insensitive.
    """
    env = os.environ if environ is None else environ
    known = known_env_vars()
    return sorted(k for k in env if k.upper().startswith("RAGPULSE_") and k.upper() not in known)


def closest_env_var(name: str) -> str | None:
    """The known ``RAGPULSE_*`` variable most like ``name`` (``difflib`` ratio ≥ 0.6), or ``None``."""
    match = difflib.get_close_matches(name.upper(), sorted(known_env_vars()), n=1, cutoff=0.6)
    return match[0] if match else None


def check_environment(environ: Mapping[str, str] | None = None) -> None:
    """Refuse an environment with an unknown ``RAGPULSE_*`` variable: a typo would otherwise fall back to a
    default silently (``RAGPULSE_STORE_DATABSE_URL`` → the embedded database).

    Raises:
        ConfigError: one line naming the first unknown variable and the closest known one.
    """
    unknown = unknown_env_vars(environ)
    if not unknown:
        return
    name = unknown[0]
    close = closest_env_var(name)
    hint = f"; did you mean {close}?" if close else " (docs/settings.md lists every setting)"
    more = f" (and {len(unknown) - 1} more: {', '.join(unknown[1:])})" if len(unknown) > 1 else ""
    raise ConfigError(f"unknown environment variable {name}{hint}{more}")


def _field_notes(model: type[BaseModel]) -> dict[str, str]:
    """``{field: text}`` of the ``#:`` comments written above each field of ``model``'s class body."""
    import inspect

    notes: dict[str, str] = {}
    pending: list[str] = []
    for line in inspect.getsource(model).splitlines():
        s = line.strip()
        if s.startswith("#:"):
            pending.append(s[2:].strip())
        elif pending and ":" in s and s.split(":", 1)[0].isidentifier():
            notes[s.split(":", 1)[0]] = " ".join(pending)
            pending = []
        else:
            pending = []
    return notes


def _default_text(section: str, field: str) -> str:
    if (section, field) in SECRETS:
        return "(environment only)"
    info = SECTIONS[section].model_fields[field]
    value = info.get_default(call_default_factory=True)
    if value is None:
        return "—"
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    text = json.dumps(value, ensure_ascii=False, default=str)
    return f"`{text}`"


def settings_reference() -> str:
    """The Markdown reference of every setting (``docs/settings.md``): one table per section with the
    environment variable, the YAML key, the default and the note from the code (``#:`` comments above each
    field). ``tests/test_settings_reference.py`` fails when the committed file differs."""
    out = [
        "# Settings reference",
        "",
        "<!-- Generated from src/ragpulse/config.py by ragpulse.config.settings_reference(); do not edit by hand.",
        "     Regenerate: .venv/bin/python -c 'from ragpulse.config import settings_reference as r; "
        'print(r(), end="")\' > docs/settings.md -->',
        "",
        "Every setting has one spelling: section `store`, key `database_url` is `store: {database_url: …}` in the",
        "YAML file (or the flat key `store_database_url`) and the environment variable",
        "`RAGPULSE_STORE_DATABASE_URL`. Environment variables win over the file. An unknown key in the file, or an",
        "unknown `RAGPULSE_*` environment variable, stops the CLI with an error naming the closest known one.",
        "Secrets come only from the environment. Lists are comma-separated in the environment where the note says",
        "so, otherwise JSON; mappings are JSON.",
        "",
        "Other `RAGPULSE_*` variables: "
        + ", ".join(f"`{n}`" for n in sorted(NON_SETTING_ENV))
        + " (the config file path; the portal's URL as clients reach it, which examples/evaluate_loop.py and"
        " Grafana-managed alerts read, not ragpulse; the test suite's and the benchmarks' own variables).",
    ]
    for section, model in SECTIONS.items():
        notes = _field_notes(model)
        doc = (model.__doc__ or "").strip().splitlines()[0].replace("``", "`")
        out += [
            "",
            f"## `{section}`",
            "",
            doc,
            "",
            "| environment variable | YAML key | default | note |",
            "|---|---|---|---|",
        ]
        for field in model.model_fields:
            key = _field_key(section, field)
            note = notes.get(field, "").replace("``", "`").replace("|", "\\|")
            out.append(
                f"| `{env_name(section, key)}` | `{section}.{key}` | {_default_text(section, field)} | {note} |"
            )
    return "\n".join(out) + "\n"
