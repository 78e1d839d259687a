"""Configuration: one YAML file plus ``RAGPULSE_*`` environment variables (pydantic-settings).

Precedence, highest first: explicit arguments > environment variables > the YAML file > defaults.

The YAML file is found at ``RAGPULSE_CONFIG`` (or the CLI's ``--config``). It may be written flat
(``judge_model: gpt-4o-mini``) or in sections (``judge: {model: gpt-4o-mini}``): a section ``judge`` with key
``model`` becomes the setting ``judge_model``, which is also the environment variable
``RAGPULSE_JUDGE_MODEL``. Settings whose value is itself a mapping (``judges``, ``checklists``) stay mappings.

Secrets (API keys, passwords) are read only from the environment; a secret in the YAML file is a
:class:`~ragpulse.errors.ConfigError`. See ``config/ragpulse.example.yaml`` for every setting.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AliasChoices,
    BaseModel,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)

from ragpulse.errors import ConfigError

__all__ = ["JudgeRoute", "Settings", "load_settings", "unknown_env_vars"]

#: Settings that may come only from the environment.
SECRET_FIELDS = frozenset(
    {"judge_api_key", "embeddings_api_key", "kafka_sasl_password", "rag_endpoint_api_key", "otlp_token"}
)


class JudgeRoute(BaseModel):
    """Which judges run for traces of an app/scenario. ``None`` matches anything; first match wins."""

    app: str | None = None
    scenario: str | None = None
    judges: list[str]


def _split_csv(v: Any) -> Any:
    if isinstance(v, str):
        return [p.strip() for p in v.split(",") if p.strip()]
    return v


def _beside(value: Any, base: Path) -> Any:
    """A relative file path in the config file that exists next to it, made absolute (checklist files)."""
    if isinstance(value, str) and not Path(value).is_absolute() and (base / value).is_file():
        return str((base / value).resolve())
    return value


class _YamlSource(PydanticBaseSettingsSource):
    """Reads the YAML config file and flattens one level of sections into ``section_key`` settings."""

    def __init__(self, settings_cls: type[BaseSettings], path: Path | None) -> None:
        super().__init__(settings_cls)
        self._data = self._load(settings_cls, path) if path else {}

    @staticmethod
    def _load(settings_cls: type[BaseSettings], path: Path) -> dict[str, Any]:
        try:
            raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except FileNotFoundError as e:
            raise ConfigError(f"config file not found: {path}") from e
        except yaml.YAMLError as e:
            raise ConfigError(f"config file {path} is not valid YAML: {e}") from e
        if not isinstance(raw, dict):
            raise ConfigError(f"config file {path} must hold a mapping at the top level")
        fields = settings_cls.model_fields
        flat: dict[str, Any] = {}
        for key, value in raw.items():
            k = str(key).replace("-", "_")
            if isinstance(value, dict) and k not in fields:
                for sub, sv in value.items():
                    flat[f"{k}_{str(sub).replace('-', '_')}"] = sv
            else:
                flat[k] = value
        unknown = sorted(k for k in flat if k not in fields)
        if unknown:
            raise ConfigError(f"config file {path}: unknown setting(s) {', '.join(unknown)}")
        secrets = sorted(k for k in flat if k in SECRET_FIELDS)
        if secrets:
            raise ConfigError(
                f"config file {path}: {', '.join(secrets)} must come from the environment "
                f"(RAGPULSE_{secrets[0].upper()}), never from a file"
            )
        if isinstance(flat.get("checklists"), dict):
            flat["checklists"] = {k: _beside(v, path.parent) for k, v in flat["checklists"].items()}
        return flat

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self._data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self._data)


class Settings(BaseSettings):
    """Every ragpulse setting. Environment variable = ``RAGPULSE_`` + the upper-cased field name."""

    model_config = SettingsConfigDict(
        env_prefix="RAGPULSE_", extra="forbid", validate_default=True, populate_by_name=True
    )

    # -- logging -------------------------------------------------------------------------------------------
    log_level: str = "INFO"
    #: ``None``: JSON unless stderr is a TTY.
    log_json: bool | None = None
    #: Put question/answer text in logs (off by default).
    log_text: bool = False

    # -- judge model (issue: judges) --------------------------------------------------------------------------
    #: OpenAI-compatible base URL, e.g. ``https://api.deepseek.com/v1``; ``None`` = OpenAI's default.
    judge_base_url: str | None = None
    #: Judge model name; unset → the offline ``heuristic`` backend.
    judge_model: str | None = None
    judge_api_key: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("RAGPULSE_JUDGE_API_KEY", "OPENAI_API_KEY", "judge_api_key"),
    )
    judge_timeout_s: float = Field(default=60.0, gt=0)
    judge_max_tokens: int = Field(default=1024, gt=0)
    judge_temperature: float = 0.0
    judge_max_retries: int = Field(default=4, ge=0)
    #: Ceiling of judge-model calls in flight (also the connection-pool size). The limit in use adapts
    #: between ``judge_min_concurrency`` and this ceiling (AIMD, docs/llm-judges.md) unless
    #: ``judge_adaptive_concurrency`` is off, when it is fixed at this value.
    judge_max_concurrency: int = Field(default=256, gt=0)
    #: Floor of the adaptive limit (calls in flight while the model answers 429/5xx).
    judge_min_concurrency: int = Field(default=2, gt=0)
    #: Adapt the limit to the model's latency and its 429/5xx answers (``false``: fixed at the ceiling).
    judge_adaptive_concurrency: bool = True
    #: Requests per minute shared by all judges (``None`` = no limit).
    judge_requests_per_minute: int | None = Field(default=None, gt=0)
    #: Retrieved-context budget per judge call, characters; top-ranked chunks are kept first.
    judge_context_budget_chars: int = Field(default=24000, gt=0)
    #: Prompt language: ``auto`` picks Chinese prompts for Chinese questions.
    judge_language: Literal["auto", "en", "zh"] = "auto"
    #: Directory with prompt templates overriding the packaged ones (``<judge>.<lang>.txt``).
    judge_prompts_dir: Path | None = None
    #: Optional daily token budget per judge (prompt + completion); over it → skipped/over_budget.
    judge_daily_token_budget: int | None = Field(default=None, gt=0)
    judge_cache_size: int = Field(default=10000, ge=0)
    #: Use openai's aiohttp transport (lower CPU per call at high concurrency).
    judge_http_transport: Literal["aiohttp", "httpx"] = "aiohttp"

    #: Judges that run by default, in order.
    enabled_judges: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["relevancy", "faithfulness", "keyword"]
    )
    #: Per-judge options, e.g. ``{"faithfulness": {"mode": "binary", "threshold": 0.5}}``.
    judges: dict[str, dict[str, Any]] = Field(default_factory=dict)
    #: Per app/scenario judge selection; first match wins, else ``enabled_judges``.
    judge_routes: list[JudgeRoute] = Field(default_factory=list)

    # -- embeddings (answer correctness similarity) -----------------------------------------------------------
    embeddings_base_url: str | None = None
    embeddings_model: str | None = None
    embeddings_api_key: SecretStr | None = None

    # -- reference metrics and checklists (issue: refmetrics) -----------------------------------------------
    #: Business checklists, each a judge named after its key: ``{name: {version, mode, threshold, apps,
    #: scenarios, items}}`` or ``{name: "path/to/checklist.yaml"}`` (a relative path in the config file is
    #: resolved against the file's directory when the file is there, else the working directory). See
    #: ``docs/reference-metrics.md`` and ``config/checklists/``.
    checklists: dict[str, Any] = Field(default_factory=dict)

    # -- engine ----------------------------------------------------------------------------------------------
    #: Traces waiting for judges; a full queue blocks the source (back-pressure).
    engine_queue_size: int = Field(default=1000, gt=0)
    #: Traces judged concurrently (a ceiling: with LLM judges the judge client's adaptive limit decides how
    #: many model calls are in flight; workers waiting for a slot cost a task each).
    engine_workers: int = Field(default=256, gt=0)
    #: Results written to the store per batch, and the longest wait before a partial batch is written.
    engine_batch_size: int = Field(default=200, gt=0)
    engine_flush_interval_s: float = Field(default=0.2, gt=0)
    #: Store writes in flight at once (each a batch in its own transaction); >1 overlaps database latency.
    engine_writers: int = Field(default=2, gt=0)
    #: Store write attempts before a batch is failed for good in an in-process replay (``serve`` retries a
    #: connection outage without limit: its sources redeliver); first backoff between them in seconds.
    engine_store_retries: int = Field(default=8, ge=1)
    engine_store_backoff_s: float = Field(default=0.5, gt=0)
    #: Share of traces judged, by hash of the trace id (same decision on every replica).
    sampling_rate: float = Field(default=1.0, ge=0.0, le=1.0)
    #: Deadline to drain in-flight work on shutdown, seconds.
    shutdown_deadline_s: float = Field(default=30.0, gt=0)

    # -- store -----------------------------------------------------------------------------------------------
    #: PostgreSQL URL; unset → embedded PostgreSQL under ``database_embedded_dir``.
    database_url: str | None = None
    #: Data directory of the embedded PostgreSQL (default: the user data dir, ``ragpulse/pgdata``).
    database_embedded_dir: Path | None = None
    database_pool_min: int = Field(default=1, ge=0)
    database_pool_max: int = Field(default=8, gt=0)
    #: Traces and judgements older than this are pruned (days; ``None`` keeps everything).
    retention_days: float | None = Field(default=None, gt=0)
    #: Store question/answer/context as SHA-256 hashes and lengths only.
    redact_text: bool = False
    #: Keep the embedded PostgreSQL running after the last ragpulse process exits (faster next start).
    database_embedded_keep_running: bool = False
    #: How long to keep waiting for the embedded PostgreSQL to start when the library's own 10 s ``pg_ctl``
    #: start timeout expires (a loaded machine), seconds.
    database_embedded_start_timeout_s: float = Field(default=60.0, gt=0)
    #: Longest time one database statement (and a wait for a pooled connection) may take, seconds.
    database_command_timeout_s: float = Field(default=60.0, gt=0)
    #: How often ``serve`` prunes old traces when ``retention_days`` is set, seconds.
    retention_interval_s: float = Field(default=3600.0, gt=0)

    # -- replay ----------------------------------------------------------------------------------------------
    #: RAG endpoint that answers test cases without a recorded answer (HTTP POST, JSON).
    rag_endpoint_url: str | None = None
    rag_endpoint_api_key: SecretStr | None = None
    rag_request_question_field: str = "question"
    rag_response_answer_field: str = "answer"
    rag_response_contexts_field: str = "contexts"
    rag_response_doc_ids_field: str = "doc_ids"
    rag_endpoint_timeout_s: float = Field(default=60.0, gt=0)
    #: ``replay`` without ``--judges``: add ``context_precision``/``context_recall`` to ``enabled_judges`` when
    #: the test set can measure retrieval (chunk labels, reference contexts, or expected answers on cases
    #: without answers; see ``ragpulse.replay.judge_defaults``).
    replay_auto_retrieval_judges: bool = True
    #: Default ``coverage`` threshold of ``replay --fail-under`` and ``gate``.
    coverage_threshold: float = Field(default=0.95, ge=0.0, le=1.0)
    #: Thresholds for ``ragpulse gate`` (same syntax as ``--min``: ``{"pass_rate": 0.8}``).
    gate_min: dict[str, float] = Field(default_factory=dict)

    # -- ingestion -------------------------------------------------------------------------------------------
    kafka_bootstrap_servers: str | None = None
    kafka_topics: Annotated[list[str], NoDecode] = Field(default_factory=lambda: ["rag-traces"])
    kafka_group_id: str = "ragpulse"
    #: Dead-letter topic for every consumed topic; default ``<topic>.dlq`` per consumed topic.
    kafka_dlq_topic: str | None = None
    #: Where a new consumer group starts reading: ``earliest`` (no trace missed) or ``latest``.
    kafka_auto_offset_reset: Literal["earliest", "latest"] = "earliest"
    kafka_security_protocol: str = "PLAINTEXT"
    kafka_sasl_mechanism: str | None = None
    kafka_sasl_username: str | None = None
    kafka_sasl_password: SecretStr | None = None
    kafka_ssl_cafile: Path | None = None
    kafka_max_message_bytes: int = Field(default=4 * 1024 * 1024, gt=0)
    #: Topics carrying OTLP trace data as the OpenTelemetry Collector's Kafka exporter publishes it, with their
    #: encoding (``otlp_proto`` or ``otlp_json``; ``json`` = trace events): ``topic=encoding`` pairs, comma
    #: separated in the environment. Listed topics are consumed in addition to ``kafka_topics``.
    kafka_topic_encodings: Annotated[dict[str, Literal["json", "otlp_proto", "otlp_json"]], NoDecode] = Field(
        default_factory=dict
    )
    #: OTLP receivers; an empty string turns one off.
    otlp_grpc_address: str = "127.0.0.1:4317"
    otlp_http_address: str = "127.0.0.1:4318"
    otlp_max_request_bytes: int = Field(default=16 * 1024 * 1024, gt=0)
    #: A trace is complete this long after its root span ended (children may be exported later), seconds.
    otlp_root_grace_s: float = Field(default=2.0, ge=0)
    #: A trace without a finished root is judged (flagged incomplete) after this idle time, seconds.
    otlp_idle_timeout_s: float = Field(default=30.0, gt=0)
    otlp_max_pending_traces: int = Field(default=10000, gt=0)
    #: Overrides of the attribute names the convention mappers read (home-grown instrumentation).
    otlp_attributes: dict[str, Any] = Field(default_factory=dict)
    #: Bearer token the OTLP receivers require (secret, environment only: ``RAGPULSE_OTLP_TOKEN``); ``None``:
    #: no authentication.
    otlp_token: SecretStr | None = None
    #: TLS certificate and key (PEM files) for both OTLP receivers; both or neither.
    otlp_tls_cert_file: Path | None = None
    otlp_tls_key_file: Path | None = None
    #: Own service name; spans from it are ignored so ragpulse never evaluates its own telemetry.
    service_name: str = "ragpulse"
    #: Health, readiness and ``/metrics``.
    http_address: str = "127.0.0.1:9464"

    # -- export ----------------------------------------------------------------------------------------------
    #: Distinct ``app`` label values kept; the rest are folded into ``other``.
    metrics_app_label_limit: int = Field(default=50, gt=0)
    pushgateway_url: str | None = None
    #: Also send each judgement as an OpenInference EVALUATOR span (needs OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT).
    evaluation_spans: bool = False

    @field_validator("enabled_judges", "kafka_topics", mode="before")
    @classmethod
    def _csv(cls, v: Any) -> Any:
        return _split_csv(v)

    @field_validator("kafka_topic_encodings", mode="before")
    @classmethod
    def _pairs(cls, v: Any) -> Any:
        if not isinstance(v, str):
            return v
        out: dict[str, str] = {}
        for pair in _split_csv(v):
            topic, sep, encoding = pair.partition("=")
            if not sep or not topic.strip() or not encoding.strip():
                raise ValueError(f"expected topic=encoding, got {pair!r} (e.g. otlp-spans=otlp_proto)")
            out[topic.strip()] = encoding.strip()
        return out

    @field_validator("enabled_judges")
    @classmethod
    def _some_judge(cls, v: list[str]) -> list[str]:
        if not v:  # e.g. RAGPULSE_ENABLED_JUDGES="": every trace would be "evaluated" by nothing
            raise ValueError("must name at least one judge, e.g. relevancy,faithfulness,keyword")
        return v

    @field_validator("otlp_tls_key_file")
    @classmethod
    def _tls_pair(cls, v: Path | None, info: ValidationInfo) -> Path | None:
        if (v is None) != (info.data.get("otlp_tls_cert_file") is None):
            raise ValueError("otlp_tls_cert_file and otlp_tls_key_file must be set together")
        return v

    @field_validator("log_level")
    @classmethod
    def _level(cls, v: str) -> str:
        level = v.strip().upper()
        if level not in _LOG_LEVELS:
            raise ValueError(f"must be one of {', '.join(_LOG_LEVELS)}, not {v!r}")
        return level

    @property
    def uses_llm(self) -> bool:
        """True when a judge model is configured (else the heuristic backend is used)."""
        return bool(self.judge_model)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        path = _CONFIG_PATH_OVERRIDE or os.environ.get("RAGPULSE_CONFIG") or None
        return (init_settings, env_settings, _YamlSource(settings_cls, Path(path) if path else None))


_CONFIG_PATH_OVERRIDE: str | None = None
_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def load_settings(config_path: str | Path | None = None, **overrides: Any) -> Settings:
    """Build :class:`Settings` from ``config_path`` (or ``RAGPULSE_CONFIG``), the environment and overrides.

    Raises:
        ConfigError: the file is missing or invalid, holds a secret, or a value fails validation.
    """
    global _CONFIG_PATH_OVERRIDE
    _CONFIG_PATH_OVERRIDE = str(config_path) if config_path else None
    try:
        return Settings(**overrides)
    except ValidationError as e:
        lines = [f"  {'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors()]
        raise ConfigError("invalid configuration:\n" + "\n".join(lines)) from e
    except SettingsError as e:  # e.g. RAGPULSE_JUDGES='{bad': a complex value that is not JSON
        m = re.search(r'field "(\w+)"', str(e))
        where = f"RAGPULSE_{m.group(1).upper()} " if m else ""
        raise ConfigError(f"invalid configuration: {where}must be JSON ({e.__cause__ or e})") from e
    finally:
        _CONFIG_PATH_OVERRIDE = None


#: ``RAGPULSE_*`` variables that are not settings but are read elsewhere (CLI, tests).
_NON_SETTING_ENV = frozenset({"RAGPULSE_CONFIG", "RAGPULSE_SHARED_DIR", "RAGPULSE_TEST_PG_ADMIN_URL"})


def unknown_env_vars(environ: Mapping[str, str] | None = None) -> list[str]:
    """``RAGPULSE_*`` environment variables that name no setting (likely typos), sorted.

    Matching is case-insensitive, as pydantic-settings reads them.
    """
    env = os.environ if environ is None else environ
    known = {f"RAGPULSE_{name}".upper() for name in Settings.model_fields} | _NON_SETTING_ENV
    return sorted(k for k in env if k.upper().startswith("RAGPULSE_") and k.upper() not in known)
