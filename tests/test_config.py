from pathlib import Path

import pytest

from ragpulse.config import load_settings
from ragpulse.errors import ConfigError


def test_yaml_sections_flatten_and_env_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "judge:\n  model: qwen-plus\n  base_url: http://x/v1\nsampling_rate: 0.5\n"
        "judges:\n  faithfulness: {mode: binary}\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("RAGPULSE_JUDGE_MODEL", "deepseek-chat")
    monkeypatch.setenv("RAGPULSE_KAFKA_TOPICS", "a, b")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    s = load_settings(cfg)
    assert s.judge_model == "deepseek-chat"
    assert s.judge_base_url == "http://x/v1"
    assert s.sampling_rate == 0.5
    assert s.judges == {"faithfulness": {"mode": "binary"}}
    assert s.kafka_topics == ["a", "b"]
    assert s.judge_api_key is not None
    assert s.judge_api_key.get_secret_value() == "sk-test"


def test_secret_in_file_rejected(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("judge:\n  api_key: sk-leak\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="environment"):
        load_settings(cfg)


def test_unknown_setting_and_bad_value_are_clear(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("sampling_rat: 0.5\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="unknown setting"):
        load_settings(cfg)
    cfg.write_text("sampling_rate: 2\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="sampling_rate"):
        load_settings(cfg)


async def test_pg_fixture_gives_an_empty_database(pg_url: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(pg_url)
    try:
        n = await conn.fetchval("select count(*) from pg_tables where schemaname = 'public'")
    finally:
        await conn.close()
    assert n == 0


def test_env_json_value_that_is_not_json_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGPULSE_JUDGES", "{bad")
    with pytest.raises(
        ConfigError, match=r"^invalid configuration: RAGPULSE_JUDGES must be JSON \(Expecting"
    ):
        load_settings()


def test_log_level_is_validated_and_normalised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGPULSE_LOG_LEVEL", "LOUD")
    with pytest.raises(ConfigError, match=r"log_level: Value error, must be one of DEBUG, INFO"):
        load_settings()
    monkeypatch.setenv("RAGPULSE_LOG_LEVEL", " warning")
    assert load_settings().log_level == "WARNING"


def test_empty_enabled_judges_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for value in ("", " , "):
        monkeypatch.setenv("RAGPULSE_ENABLED_JUDGES", value)
        with pytest.raises(ConfigError, match=r"enabled_judges: Value error, must name at least one judge"):
            load_settings()
    monkeypatch.setenv("RAGPULSE_ENABLED_JUDGES", "keyword, relevancy")
    assert load_settings().enabled_judges == ["keyword", "relevancy"]


def test_unknown_ragpulse_env_vars_are_named() -> None:
    from ragpulse.config import unknown_env_vars

    env = {
        "RAGPULSE_JUGE_MODEL": "x",  # typo
        "RAGPULSE_JUDGE_MODEL": "m",
        "ragpulse_sampling_rate": "0.5",  # case-insensitive, like pydantic-settings
        "RAGPULSE_CONFIG": "c.yaml",
        "RAGPULSE_JUDGE_API_KEY": "k",
        "PATH": "/bin",
    }
    assert unknown_env_vars(env) == ["RAGPULSE_JUGE_MODEL"]
