"""Labelled metric series exist at 0 from the start (issue 30 item 9): a real ``ragpulse serve`` scraped on its
``/metrics`` before any traffic shows every series it knows (judges × outcomes, error reasons, tokens, sources,
rejection reasons, congestion signals) at 0, so a dashboard of a healthy system reads 0, not "No data".
"""

from __future__ import annotations

import time

import httpx

from ingest.serve_testutil import ServeProcess
from ragpulse.testing.openai_server import ScriptedOpenAIServer
from testsupport import free_port, private_db, scripted_judge_env

from .helpers import samples, value

OUTCOMES = ("pass", "fail", "error", "abstained", "skipped")
OTLP_REASONS = {
    "bad_span", "not_taken", "malformed", "too_large", "unsupported_media_type", "unauthenticated", "cross_site",
    "overloaded", "unmappable",
}  # fmt: skip
SIGNALS = {"rate_limited", "unavailable", "gateway_timeout", "slow_error", "timeout", "connection", "latency"}


def _labels(text: str, name: str, key: str, **match: str) -> dict[str, float]:
    """``{label key's value: sample value}`` of the samples ``name`` whose other labels are ``match``."""
    out: dict[str, float] = {}
    for (n, lbls), v in samples(text).items():
        d = dict(lbls)
        if n == name and all(d.get(k) == w for k, w in match.items()) and set(d) == {key, *match}:
            out[d[key]] = v
    return out


def test_serve_shows_known_series_at_zero_before_any_traffic() -> None:
    http_port, otlp_port = free_port(), free_port()
    with ScriptedOpenAIServer() as model, private_db() as db:
        serve = ServeProcess(
            scripted_judge_env(
                model.base_url,
                RAGPULSE_STORE_DATABASE_URL=db,
                RAGPULSE_HTTP_ADDRESS=f"127.0.0.1:{http_port}",
                RAGPULSE_OTLP_HTTP_ADDRESS=f"127.0.0.1:{otlp_port}",
                RAGPULSE_OTLP_GRPC_ADDRESS="",
                RAGPULSE_JUDGE_ENABLED="relevancy,faithfulness,keyword",
                RAGPULSE_EXPORT_MODEL_PRICES='{"gpt-4o-mini": {"prompt": 0.15, "completion": 0.6}}',
            )
        )
        serve.start()
        try:
            text = httpx.get(f"http://127.0.0.1:{http_port}/metrics", timeout=10).text
            # every judge × outcome, app "unknown" (apps are not known before their traffic)
            for judge in ("relevancy", "faithfulness", "keyword"):
                got = _labels(text, "ragpulse_judgements_total", "outcome", judge=judge, app="unknown")
                assert got == dict.fromkeys(OUTCOMES, 0.0), judge
            # error reasons: the model's for the judges that call it, judge_exception for all
            model_reasons = {
                "judge_exception",
                "judge_unavailable",
                "unparseable",
                "out_of_range",
                "truncated",
            }
            for judge in ("relevancy", "faithfulness"):
                errors = _labels(text, "ragpulse_judge_errors_total", "reason", judge=judge)
                assert errors == dict.fromkeys(model_reasons, 0.0), judge
                tokens = _labels(text, "ragpulse_judge_tokens_total", "kind", judge=judge)
                assert tokens == {"prompt": 0.0, "completion": 0.0}, judge
            assert _labels(text, "ragpulse_judge_errors_total", "reason", judge="keyword") == {
                "judge_exception": 0.0
            }
            assert _labels(text, "ragpulse_judge_tokens_total", "kind", judge="keyword") == {}  # no model
            received = _labels(text, "ragpulse_traces_received_total", "source")
            assert received == dict.fromkeys(("kafka", "otlp", "replay", "api"), 0.0)
            assert _labels(text, "ragpulse_traces_rejected_total", "reason", source="otlp") == dict.fromkeys(
                OTLP_REASONS, 0.0
            )
            assert _labels(text, "ragpulse_traces_rejected_total", "reason", source="kafka") == {}  # no Kafka
            assert value(text, "ragpulse_traces_not_sampled_total") == 0.0
            assert _labels(text, "ragpulse_judge_concurrency_decreases_total", "signal") == dict.fromkeys(
                SIGNALS, 0.0
            )
            # the app's own tokens and cost for the priced models; the OTLP intake's own counters
            app_tokens = _labels(
                text, "ragpulse_app_tokens_total", "kind", app="unknown", model="gpt-4o-mini"
            )
            assert app_tokens == {"prompt": 0.0, "completion": 0.0}
            assert value(text, "ragpulse_app_cost_total", app="unknown", model="gpt-4o-mini") == 0.0
            not_taken = _labels(text, "ragpulse_otlp_spans_not_taken_total", "reason")
            assert not_taken == dict.fromkeys(("late", "over_limit", "no_room"), 0.0)
            assert value(text, "ragpulse_otlp_own_spans_ignored_total") == 0.0

            # a real rejection counts on the series that was there at 0; the others stay 0
            bad = httpx.post(
                f"http://127.0.0.1:{otlp_port}/v1/traces",
                content=b"not protobuf",
                headers={"Content-Type": "application/x-protobuf"},
                timeout=10,
            )
            assert bad.status_code == 400, bad.text
            deadline = time.monotonic() + 10
            while True:
                text = httpx.get(f"http://127.0.0.1:{http_port}/metrics", timeout=10).text
                rejected = _labels(text, "ragpulse_traces_rejected_total", "reason", source="otlp")
                if rejected.get("malformed") == 1.0 or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            assert rejected == {**dict.fromkeys(OTLP_REASONS, 0.0), "malformed": 1.0}
            assert model.request_count == 0  # nothing was judged to make these series
        finally:
            serve.terminate()
