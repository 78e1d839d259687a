import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from ragpulse.config import (
    FLAT_NAMES,
    SECTIONS,
    JudgeRoute,
    Settings,
    check_environment,
    env_name,
    known_env_vars,
    load_settings,
)
from ragpulse.errors import ConfigError


def test_yaml_sections_flatten_and_env_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "judge:\n  model: qwen-plus\n  base_url: http://x/v1\nengine_sampling_rate: 0.5\n"
        "judge_options:\n  faithfulness: {mode: binary}\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("RAGPULSE_JUDGE_MODEL", "deepseek-chat")
    monkeypatch.setenv("RAGPULSE_KAFKA_TOPICS", "a, b")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    s = load_settings(cfg)
    assert s.judge.model == "deepseek-chat"
    assert s.judge.base_url == "http://x/v1"
    assert s.engine.sampling_rate == 0.5
    assert s.judge.options == {"faithfulness": {"mode": "binary"}}
    assert s.kafka.topics == ["a", "b"]
    assert s.judge.api_key is not None
    assert s.judge.api_key.get_secret_value() == "sk-test"


#: Bad settings, each a config file text (or ``None``) and environment, and the ``ConfigError`` message it gives
#: (a regex): the message names the setting and where it came from.
BAD_SETTINGS: list[tuple[str, str | None, dict[str, str], str]] = [
    (
        "secret in a file",
        "judge:\n  api_key: sk-leak\n",
        {},
        r"judge\.api_key must come from the environment",
    ),
    (
        "api token in a file",
        "api:\n  token: t\n",
        {},
        r"api\.token must come from the environment \(RAGPULSE_API_TOKEN\)",
    ),
    ("unknown setting", "sampling_rat: 0.5\n", {}, "unknown setting"),
    (
        "value out of range",
        "engine_sampling_rate: 2\n",
        {},
        r"engine\.sampling_rate \(engine_sampling_rate in config file .*c\.yaml\): Input should be less",
    ),
    (
        "JSON variable that is not JSON",
        None,
        {"RAGPULSE_JUDGE_OPTIONS": "{bad"},
        r"^invalid configuration: RAGPULSE_JUDGE_OPTIONS must be JSON \(Expecting",
    ),
    (
        "unknown log level",
        None,
        {"RAGPULSE_LOG_LEVEL": "LOUD"},
        r"log\.level \(RAGPULSE_LOG_LEVEL\): Value error, must be one of DEBUG, INFO",
    ),
    *[
        (
            f"enabled judges {value!r}",
            None,
            {"RAGPULSE_JUDGE_ENABLED": value},
            r"judge\.enabled \(RAGPULSE_JUDGE_ENABLED\): Value error, must name at least one judge",
        )
        for value in ("", " , ")
    ],
    (
        "unknown topic encoding",
        None,
        {"RAGPULSE_KAFKA_TOPIC_ENCODINGS": "a=avro"},
        r"kafka\.topic_encodings\.a \(RAGPULSE_KAFKA_TOPIC_ENCODINGS\): Input should be .json., .otlp_proto. or "
        r".otlp_json.",
    ),
    (
        "topic encoding without '='",
        None,
        {"RAGPULSE_KAFKA_TOPIC_ENCODINGS": "justatopic"},
        "topic=encoding pairs",
    ),
    (
        "TLS certificate without key",
        None,
        {"RAGPULSE_OTLP_TLS_CERT_FILE": "/c.pem"},
        "tls_cert_file and tls_key_file must be set together",
    ),
    (
        "RAG endpoint URL not http",
        "rag:\n  endpoints:\n    x: {url: 'ftp://nope'}\n",
        {},
        r"rag\.endpoints\.x\.url .*must be an http\(s\) URL",
    ),
    (
        "RAG endpoint key in a file",
        "rag:\n  endpoints:\n    x: {url: 'http://a', api_key: k}\n",
        {},
        r"rag\.endpoints\.x\.api_key .*Extra inputs are not permitted",
    ),
]


@pytest.mark.parametrize(
    ("case", "yaml_text", "environ", "message"), BAD_SETTINGS, ids=[b[0] for b in BAD_SETTINGS]
)
def test_bad_settings_are_config_errors_naming_the_setting(
    tmp_path: Path, case: str, yaml_text: str | None, environ: dict[str, str], message: str
) -> None:
    cfg = None
    if yaml_text is not None:
        cfg = tmp_path / "c.yaml"
        cfg.write_text(yaml_text, encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        load_settings(cfg, environ=environ)


async def test_pg_fixture_gives_an_empty_database(pg_url: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(pg_url)
    try:
        n = await conn.fetchval("select count(*) from pg_tables where schemaname = 'public'")
    finally:
        await conn.close()
    assert n == 0


def test_log_level_is_normalised_and_enabled_judges_split(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGPULSE_LOG_LEVEL", " warning")
    monkeypatch.setenv("RAGPULSE_JUDGE_ENABLED", "keyword, relevancy")
    s = load_settings()
    assert s.log.level == "WARNING"
    assert s.judge.enabled == ["keyword", "relevancy"]


def test_unknown_ragpulse_env_vars_are_named() -> None:
    from ragpulse.config import unknown_env_vars

    env = {
        "RAGPULSE_JUGE_MODEL": "x",  # typo
        "RAGPULSE_JUDGE_MODEL": "m",
        "ragpulse_engine_sampling_rate": "0.5",  # case-insensitive, like pydantic-settings
        "RAGPULSE_CONFIG": "c.yaml",
        "RAGPULSE_JUDGE_API_KEY": "k",
        "PATH": "/bin",
    }
    assert unknown_env_vars(env) == ["RAGPULSE_JUGE_MODEL"]


#: Every setting name ragpulse had before settings were grouped into sections, in its one spelling today (flat
#: YAML key; environment variable = RAGPULSE_ + upper case), with a valid value in the environment's text form
#: and where it lands.
SETTING_EXAMPLES: list[tuple[str, str, str, Any]] = [
    ("log_level", "debug", "log.level", "DEBUG"),
    ("log_json", "true", "log.json_", True),
    ("log_text", "true", "log.text", True),
    ("judge_base_url", "http://j/v1", "judge.base_url", "http://j/v1"),
    ("judge_model", "m", "judge.model", "m"),
    ("judge_timeout_s", "7", "judge.timeout_s", 7.0),
    ("judge_max_tokens", "9", "judge.max_tokens", 9),
    ("judge_temperature", "0.5", "judge.temperature", 0.5),
    ("judge_max_retries", "1", "judge.max_retries", 1),
    ("judge_max_concurrency", "3", "judge.max_concurrency", 3),
    ("judge_requests_per_minute", "60", "judge.requests_per_minute", 60),
    ("judge_context_budget_chars", "100", "judge.context_budget_chars", 100),
    ("judge_language", "zh", "judge.language", "zh"),
    ("judge_prompts_dir", "/p", "judge.prompts_dir", Path("/p")),
    ("judge_daily_token_budget", "1000", "judge.daily_token_budget", 1000),
    ("judge_cache_size", "5", "judge.cache_size", 5),
    ("judge_http_transport", "httpx", "judge.http_transport", "httpx"),
    ("judge_enabled", "keyword", "judge.enabled", ["keyword"]),
    ("judge_options", '{"keyword": {"threshold": 0.5}}', "judge.options", {"keyword": {"threshold": 0.5}}),
    (
        "judge_routes",
        '[{"app": "a", "judges": ["keyword"]}]',
        "judge.routes",
        [JudgeRoute(app="a", judges=["keyword"])],
    ),
    ("embeddings_base_url", "http://e/v1", "embeddings.base_url", "http://e/v1"),
    ("embeddings_model", "emb", "embeddings.model", "emb"),
    ("judge_checklists", '{"c": "cl.yaml"}', "judge.checklists", {"c": "cl.yaml"}),
    ("engine_queue_size", "11", "engine.queue_size", 11),
    ("engine_workers", "2", "engine.workers", 2),
    ("engine_batch_size", "3", "engine.batch_size", 3),
    ("engine_flush_interval_s", "0.5", "engine.flush_interval_s", 0.5),
    ("engine_writers", "4", "engine.writers", 4),
    ("engine_store_retries", "2", "engine.store_retries", 2),
    ("engine_store_backoff_s", "0.1", "engine.store_backoff_s", 0.1),
    ("engine_sampling_rate", "0.25", "engine.sampling_rate", 0.25),
    ("engine_shutdown_deadline_s", "5", "engine.shutdown_deadline_s", 5.0),
    ("store_database_url", "postgresql://x/y", "store.database_url", "postgresql://x/y"),
    ("store_embedded_dir", "/d", "store.embedded_dir", Path("/d")),
    ("store_pool_min", "2", "store.pool_min", 2),
    ("store_pool_max", "3", "store.pool_max", 3),
    ("store_retention_days", "7", "store.retention_days", 7.0),
    ("store_redact_text", "true", "store.redact_text", True),
    ("store_embedded_keep_running", "true", "store.embedded_keep_running", True),
    ("store_embedded_start_timeout_s", "9", "store.embedded_start_timeout_s", 9.0),
    ("store_command_timeout_s", "8", "store.command_timeout_s", 8.0),
    ("store_retention_interval_s", "60", "store.retention_interval_s", 60.0),
    ("rag_endpoint_url", "http://rag/ask", "rag.endpoint_url", "http://rag/ask"),
    ("rag_request_question_field", "q", "rag.request_question_field", "q"),
    ("rag_response_answer_field", "a", "rag.response_answer_field", "a"),
    ("rag_response_contexts_field", "c", "rag.response_contexts_field", "c"),
    ("rag_response_doc_ids_field", "d", "rag.response_doc_ids_field", "d"),
    ("rag_endpoint_timeout_s", "3", "rag.endpoint_timeout_s", 3.0),
    ("replay_auto_retrieval_judges", "false", "replay.auto_retrieval_judges", False),
    ("replay_coverage_threshold", "0.5", "replay.coverage_threshold", 0.5),
    ("replay_gate_min", '{"pass_rate": 0.8}', "replay.gate_min", {"pass_rate": 0.8}),
    ("kafka_bootstrap_servers", "k:9092", "kafka.bootstrap_servers", "k:9092"),
    ("kafka_topics", "a,b", "kafka.topics", ["a", "b"]),
    ("kafka_group_id", "g", "kafka.group_id", "g"),
    ("kafka_dlq_topic", "dead", "kafka.dlq_topic", "dead"),
    ("kafka_auto_offset_reset", "latest", "kafka.auto_offset_reset", "latest"),
    ("kafka_security_protocol", "SSL", "kafka.security_protocol", "SSL"),
    ("kafka_sasl_mechanism", "PLAIN", "kafka.sasl_mechanism", "PLAIN"),
    ("kafka_sasl_username", "u", "kafka.sasl_username", "u"),
    ("kafka_ssl_cafile", "/ca.pem", "kafka.ssl_cafile", Path("/ca.pem")),
    ("kafka_max_message_bytes", "1000", "kafka.max_message_bytes", 1000),
    ("otlp_grpc_address", "", "otlp.grpc_address", ""),
    ("otlp_http_address", "127.0.0.1:1", "otlp.http_address", "127.0.0.1:1"),
    ("otlp_max_request_bytes", "100", "otlp.max_request_bytes", 100),
    ("otlp_root_grace_s", "1", "otlp.root_grace_s", 1.0),
    ("otlp_idle_timeout_s", "2", "otlp.idle_timeout_s", 2.0),
    ("otlp_max_pending_traces", "3", "otlp.max_pending_traces", 3),
    ("otlp_attributes", '{"question": "q"}', "otlp.attributes", {"question": "q"}),
    ("export_service_name", "me", "export.service_name", "me"),
    ("http_address", "127.0.0.1:2", "http.address", "127.0.0.1:2"),
    ("export_metrics_app_label_limit", "5", "export.metrics_app_label_limit", 5),
    ("export_pushgateway_url", "http://pg:9091", "export.pushgateway_url", "http://pg:9091"),
    ("export_evaluation_spans", "true", "export.evaluation_spans", True),
]

#: The secrets: environment only.
SECRET_NAMES = {
    "judge_api_key": "judge.api_key",
    "embeddings_api_key": "embeddings.api_key",
    "kafka_sasl_password": "kafka.sasl_password",
    "rag_endpoint_api_key": "rag.endpoint_api_key",
}


def _get(s: Settings, path: str) -> Any:
    section, key = path.split(".")
    return getattr(getattr(s, section), key)


@pytest.mark.parametrize(
    ("name", "text", "path", "expected"), SETTING_EXAMPLES, ids=[n[0] for n in SETTING_EXAMPLES]
)
def test_every_setting_is_read_from_its_environment_variable(
    name: str, text: str, path: str, expected: Any
) -> None:
    s = load_settings(environ={f"RAGPULSE_{name.upper()}": text})
    assert _get(s, path) == expected
    assert _get(Settings(), path) != expected  # the value really came from the variable


@pytest.mark.parametrize(
    ("name", "text", "path", "expected"), SETTING_EXAMPLES, ids=[n[0] for n in SETTING_EXAMPLES]
)
def test_every_setting_is_read_from_its_flat_yaml_key(
    tmp_path: Path, name: str, text: str, path: str, expected: Any
) -> None:
    value = json.loads(text) if text.startswith(("{", "[")) else text
    if path in {"judge.enabled", "kafka.topics"}:
        value = text.split(",")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({name: value}), encoding="utf-8")
    s = load_settings(cfg, environ={})
    assert _get(s, path) == expected


@pytest.mark.parametrize(("name", "path"), SECRET_NAMES.items())
def test_secret_variables_work_and_stay_out_of_files(tmp_path: Path, name: str, path: str) -> None:
    s = load_settings(environ={f"RAGPULSE_{name.upper()}": "sekret"})
    assert _get(s, path).get_secret_value() == "sekret"
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"{name}: sekret\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=f"{path} must come from the environment"):
        load_settings(cfg, environ={})


def test_one_naming_rule_section_key_is_yaml_section_flat_key_and_variable(tmp_path: Path) -> None:
    """Section ``store``, key ``retention_days``: ``store: {retention_days}``, ``store_retention_days``,
    ``RAGPULSE_STORE_RETENTION_DAYS`` (and every section key has exactly that variable)."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text("store:\n  retention_days: 3\n", encoding="utf-8")
    assert load_settings(cfg, environ={}).store.retention_days == 3
    cfg.write_text("store_retention_days: 4\n", encoding="utf-8")
    assert load_settings(cfg, environ={}).store.retention_days == 4
    assert load_settings(environ={"RAGPULSE_STORE_RETENTION_DAYS": "5"}).store.retention_days == 5
    assert env_name("api", "token") == "RAGPULSE_API_TOKEN"
    s = load_settings(environ={"RAGPULSE_API_TOKEN": "t", "RAGPULSE_ENGINE_SAMPLING_RATE": "0.5"})
    assert s.api.token is not None
    assert s.api.token.get_secret_value() == "t"
    assert s.engine.sampling_rate == 0.5
    for section, model in SECTIONS.items():
        for field, info in model.model_fields.items():
            key = info.alias or field
            assert FLAT_NAMES[f"{section}_{key}"] == (section, field)
            assert f"RAGPULSE_{section}_{key}".upper() in known_env_vars()


#: Names that were aliases before there was one spelling per setting → the one spelling.
FORMER_ALIASES: list[tuple[str, str]] = [
    ("enabled_judges", "judge_enabled"),
    ("judges", "judge_options"),
    ("checklists", "judge_checklists"),
    ("sampling_rate", "engine_sampling_rate"),
    ("shutdown_deadline_s", "engine_shutdown_deadline_s"),
    ("database_url", "store_database_url"),
    ("database_embedded_dir", "store_embedded_dir"),
    ("database_embedded_keep_running", "store_embedded_keep_running"),
    ("database_embedded_start_timeout_s", "store_embedded_start_timeout_s"),
    ("database_pool_min", "store_pool_min"),
    ("database_pool_max", "store_pool_max"),
    ("database_command_timeout_s", "store_command_timeout_s"),
    ("retention_days", "store_retention_days"),
    ("retention_interval_s", "store_retention_interval_s"),
    ("redact_text", "store_redact_text"),
    ("service_name", "export_service_name"),
    ("metrics_app_label_limit", "export_metrics_app_label_limit"),
    ("pushgateway_url", "export_pushgateway_url"),
    ("evaluation_spans", "export_evaluation_spans"),
    ("corrected_window_s", "export_corrected_window_s"),
    ("corrected_interval_s", "export_corrected_interval_s"),
    ("coverage_threshold", "replay_coverage_threshold"),
    ("gate_min", "replay_gate_min"),
]


@pytest.mark.parametrize(("old", "new"), FORMER_ALIASES, ids=[a for a, _ in FORMER_ALIASES])
def test_a_former_alias_is_refused_naming_the_one_spelling(tmp_path: Path, old: str, new: str) -> None:
    """No setting has two names: a former alias in the environment or the file is an error, never read and
    never ignored; the message names the setting's one spelling (``judges`` is too far from
    ``judge_options`` for a suggestion and gets the pointer to docs/settings.md)."""
    env = {f"RAGPULSE_{old.upper()}": "1"}
    with pytest.raises(ConfigError) as err:
        check_environment(env)
    hint = f"did you mean RAGPULSE_{new.upper()}?" if old != "judges" else "RAGPULSE_JUDGE_ROUTES"
    assert str(err.value).startswith(f"unknown environment variable RAGPULSE_{old.upper()}")
    assert hint in str(err.value)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"{old}: 1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=f"unknown setting\\(s\\) {old}"):
        load_settings(cfg, environ={})


def test_an_env_typo_is_one_error_naming_the_closest_setting() -> None:
    with pytest.raises(ConfigError) as err:
        check_environment({"RAGPULSE_JUGE_MODEL": "x", "RAGPULSE_JUDGE_MODEL": "m", "PATH": "/bin"})
    assert (
        str(err.value)
        == "unknown environment variable RAGPULSE_JUGE_MODEL; did you mean RAGPULSE_JUDGE_MODEL?"
    )
    with pytest.raises(ConfigError) as err:
        check_environment({"RAGPULSE_ZZZZZZ": "1", "RAGPULSE_JUGE_MODEL": "x"})
    assert str(err.value) == (
        "unknown environment variable RAGPULSE_JUGE_MODEL; did you mean RAGPULSE_JUDGE_MODEL?"
        " (and 1 more: RAGPULSE_ZZZZZZ)"
    )
    check_environment(
        {"RAGPULSE_CONFIG": "c.yaml", "RAGPULSE_TEST_PG_ADMIN_URL": "x", "RAGPULSE_SHARED_DIR": "d"}
    )


def test_the_documented_portal_url_variable_is_not_refused() -> None:
    """``RAGPULSE_PORTAL_URL`` (examples/evaluate_loop.py, Grafana-managed alerts) set beside the settings."""
    check_environment({"RAGPULSE_PORTAL_URL": "http://127.0.0.1:9470"})


def test_a_yaml_typo_names_the_closest_key(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("store:\n  retention_dais: 3\n", encoding="utf-8")
    with pytest.raises(
        ConfigError, match=r"unknown setting\(s\) store.retention_dais; did you mean store.retention_days\?"
    ):
        load_settings(cfg, environ={})


def test_settings_without_arguments_are_the_defaults_not_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RAGPULSE_ENGINE_SAMPLING_RATE", "0.1")
    monkeypatch.setenv("RAGPULSE_CONFIG", "/nonexistent.yaml")
    assert Settings().engine.sampling_rate == 1.0
    assert Settings(engine_sampling_rate=0.3).engine.sampling_rate == 0.3
    assert Settings(engine_sampling_rate=0.3).replaced(judge_model="m").engine.sampling_rate == 0.3


def test_new_settings_and_their_validation(tmp_path: Path) -> None:
    s = load_settings(environ={})
    assert s.api.address == "127.0.0.1:9470"
    assert s.api.token is None
    assert s.api.allow_anonymous is False
    assert s.api.max_upload_mb == 20
    assert s.export.corrected_window_s == 3600
    assert s.kafka.results_topic is None
    env = {
        "RAGPULSE_API_ADDRESS": "",
        "RAGPULSE_API_ALLOW_ANONYMOUS": "true",
        "RAGPULSE_API_MAX_UPLOAD_MB": "5",
        "RAGPULSE_OTLP_TOKEN": "o",
        "RAGPULSE_KAFKA_TOPIC_ENCODINGS": "otlp-spans=otlp_proto, otlp-json=otlp_json",
        "RAGPULSE_KAFKA_RESULTS_TOPIC": "results",
        "RAGPULSE_EXPORT_CORRECTED_WINDOW_S": "600",
    }
    s = load_settings(environ=env)
    assert s.api.address == ""
    assert s.api.allow_anonymous is True
    assert s.api.max_upload_mb == 5
    assert s.otlp.token is not None
    assert s.otlp.token.get_secret_value() == "o"
    assert s.kafka.topic_encodings == {"otlp-spans": "otlp_proto", "otlp-json": "otlp_json"}
    assert s.kafka.results_topic == "results"
    assert s.export.corrected_window_s == 600
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "rag_endpoints:\n  prod: {url: 'http://rag/ask', top_k_field: k, api_key_env: RAG_KEY}\n"
        "judge_models:\n  big: {model: gpt-4o, base_url: 'http://j/v1', api_key_env: BIG_KEY}\n",
        encoding="utf-8",
    )
    s = load_settings(cfg, environ={})
    assert s.rag.endpoints["prod"].url == "http://rag/ask"
    assert s.rag.endpoints["prod"].top_k_field == "k"
    assert s.rag.endpoints["prod"].question_field == "question"
    assert s.rag.endpoints["prod"].api_key_env == "RAG_KEY"
    assert s.judge.models["big"].model == "gpt-4o"
    assert s.judge.models["big"].api_key_env == "BIG_KEY"


def test_config_path_comes_from_the_argument_or_the_environment_given(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("engine_sampling_rate: 0.5\n", encoding="utf-8")
    assert load_settings(environ={"RAGPULSE_CONFIG": str(cfg)}).engine.sampling_rate == 0.5
    assert load_settings(cfg, environ={}).engine.sampling_rate == 0.5
    assert load_settings(environ={}).engine.sampling_rate == 1.0  # nothing left over from the calls above


def test_checklist_paths_follow_one_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A relative path in the file: beside the file when it is there, else the working directory; from the
    environment: the working directory."""
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "beside.yaml").write_text("x", encoding="utf-8")
    (tmp_path / "cwd.yaml").write_text("x", encoding="utf-8")
    cfg = tmp_path / "conf" / "c.yaml"
    cfg.write_text("judge_checklists: {a: beside.yaml, b: cwd.yaml}\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    s = load_settings(cfg, environ={})
    assert s.judge.checklists == {"a": str(tmp_path / "conf" / "beside.yaml"), "b": "cwd.yaml"}
    s = load_settings(environ={"RAGPULSE_JUDGE_CHECKLISTS": '{"a": "beside.yaml"}'})
    assert s.judge.checklists == {"a": "beside.yaml"}


def test_model_copy_with_a_flat_name_is_refused_not_ignored() -> None:
    s = Settings()
    with pytest.raises(TypeError, match=r"sampling_rate is not a section; use Settings\.replaced\(\)"):
        s.model_copy(update={"sampling_rate": 0.5})
    assert s.replaced(engine_sampling_rate=0.5).engine.sampling_rate == 0.5
    assert (
        s.model_copy(
            update={"engine": s.engine.model_copy(update={"sampling_rate": 0.2})}
        ).engine.sampling_rate
        == 0.2
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\xff\xfe\x00", r"is not UTF-8 text \(byte 0\)"),
        (b"[" * 10_000 + b"]" * 10_000, r"nests too deeply to be a configuration"),
        (b"engine_sampling_rate: " + b"[" * 10_000 + b"]" * 10_000, r"nests too deeply"),
        (b"root:*:20228:0:99999:7:::\nbin:*:20228:0:99999:7:::\n", r"2 key\(s\) that are not setting names"),
        (b"a: [\nsecret-text-here", r"is not valid YAML: .* at line \d+, column \d+$"),
    ],
)
def test_a_file_that_is_no_config_is_a_config_error_without_its_content(
    tmp_path: Path, content: bytes, message: str
) -> None:
    cfg = tmp_path / "odd.yaml"
    cfg.write_bytes(content)
    with pytest.raises(ConfigError, match=message) as ei:
        load_settings(cfg, environ={})
    assert "root:" not in str(ei.value)
    assert "secret-text-here" not in str(ei.value)
