"""Issue 25 item 3: a portal run's named judge model and RAG endpoint get only the key configured for their
host. Two named models on two scripted OpenAI-compatible servers and two RAG endpoints on two real HTTP
servers; each server's recorded ``Authorization`` header is asserted."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from ragpulse.config import Settings, load_settings
from ragpulse.judges.model.client import LLMClient
from ragpulse.runs.endpoints import key_for, run_settings, same_host
from ragpulse.runs.rag_client import RagClient
from ragpulse.testing.openai_server import ScriptedOpenAIServer
from testsupport import serve_http

SEEN: dict[str, list[str | None]] = {}


class _Rag(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        SEEN.setdefault(self.path, []).append(self.headers.get("authorization"))
        body = json.dumps({"answer": "A", "contexts": []}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def servers() -> Iterator[tuple[ScriptedOpenAIServer, ScriptedOpenAIServer, str, str]]:
    with (
        ScriptedOpenAIServer(lambda _req: "ok") as home,
        ScriptedOpenAIServer(lambda _req: "ok") as other,
        serve_http(_Rag) as rag_home,
        serve_http(_Rag) as rag_other,
    ):
        SEEN.clear()
        yield home, other, rag_home, rag_other


def _settings(tmp_path: Path, home: str, other: str, rag_home: str, rag_other: str) -> Settings:
    cfg = tmp_path / "ragpulse.yaml"
    cfg.write_text(
        f"""
judge:
  base_url: {home}
  model: section-model
  models:
    same-host: {{model: m-home}}
    same-host-explicit: {{model: m-home2, base_url: {home}}}
    other-no-key: {{model: m-other, base_url: {other}}}
    other-own-key: {{model: m-other2, base_url: {other}, api_key_env: OTHER_JUDGE_KEY}}
rag:
  endpoint_url: {rag_home}/section
  endpoints:
    home: {{url: {rag_home}/named}}
    other-no-key: {{url: {rag_other}/x}}
    other-own-key: {{url: {rag_other}/y, api_key_env: OTHER_RAG_KEY}}
"""
    )
    env = {
        "RAGPULSE_JUDGE_API_KEY": "section-judge-key",
        "RAGPULSE_RAG_ENDPOINT_API_KEY": "section-rag-key",
    }
    return load_settings(cfg, environ=env)


async def test_each_named_model_and_endpoint_gets_only_its_own_hosts_key(
    servers: tuple[ScriptedOpenAIServer, ScriptedOpenAIServer, str, str], tmp_path: Path
) -> None:
    home, other, rag_home, rag_other = servers
    base = _settings(tmp_path, home.base_url, other.base_url, rag_home, rag_other)
    env = {"OTHER_JUDGE_KEY": "other-judge-key", "OTHER_RAG_KEY": "other-rag-key"}
    for name in ("same-host", "same-host-explicit", "other-no-key", "other-own-key"):
        async with LLMClient(run_settings(base, judge_model=name, environ=env)) as client:
            await client.complete(
                judge="relevancy", version="v", messages=[{"role": "user", "content": name}]
            )
    seen = {(r.body["model"], r.headers.get("authorization")) for r in home.requests}
    assert seen == {("m-home", "Bearer section-judge-key"), ("m-home2", "Bearer section-judge-key")}
    # the other host never sees the judge section's key: no key (the client's placeholder) or its own
    seen_other = [(r.body["model"], r.headers.get("authorization")) for r in other.requests]
    assert seen_other == [("m-other", "Bearer not-set"), ("m-other2", "Bearer other-judge-key")]
    for name in ("home", "other-no-key", "other-own-key"):
        async with RagClient(run_settings(base, rag_endpoint=name, environ=env)) as rag:
            assert (await rag.ask("q?")).answer == "A"
    assert SEEN == {"/named": ["Bearer section-rag-key"], "/x": [None], "/y": ["Bearer other-rag-key"]}


def test_an_unset_key_variable_sends_no_key_and_hosts_compare_by_origin() -> None:
    assert (
        key_for("http://b:1/v1", "NOT_SET", section_url="http://b:1/v1", section_key=None, environ={}) is None
    )
    assert same_host("https://api.openai.com/v1", None)
    assert same_host("http://h/v1", "http://H:80/other")
    assert not same_host("http://h:8000/v1", "http://h:8001/v1")
    assert not same_host("http://h/v1", "https://h/v1")


def test_a_judges_own_model_stays_on_the_sections_host_when_the_run_picks_another() -> None:
    base = Settings(
        judge={
            "base_url": "http://home:8000/v1",
            "model": "m",
            "models": {"far": {"model": "m-far", "base_url": "http://far:9000/v1"}, "near": {"model": "m2"}},
            "options": {
                "faithfulness": {"model": "small", "api_key_env": "SMALL_KEY", "shadow": {"model": "s2"}},
                "relevancy": {"threshold": 0.5},
            },
        }
    )
    far = run_settings(base, judge_model="far", environ={})
    assert far.judge.base_url == "http://far:9000/v1"
    assert far.judge.options["faithfulness"] == {
        "model": "small",
        "api_key_env": "SMALL_KEY",
        "base_url": "http://home:8000/v1",
        "shadow": {"model": "s2", "base_url": "http://home:8000/v1"},
    }
    assert far.judge.options["relevancy"] == {"threshold": 0.5}
    near = run_settings(base, judge_model="near", environ={})  # same host: nothing to pin
    assert near.judge.options == base.judge.options
