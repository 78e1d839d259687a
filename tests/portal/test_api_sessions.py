"""Sessions and the app's token usage through the REST API of a started ``ragpulse serve`` (real PostgreSQL,
real HTTP): the ``session`` filter of the trace list, ``GET /api/v1/sessions/{id}`` in turn order, and the
price table's cost (``null`` for a model missing from the table, never 0)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from portal_testutil import Portal, problem_detail, seed, started_portal
from ragpulse.model import ModelUsage, Source, Trace, TraceOutcome, TraceResult, Turn

pytestmark = pytest.mark.integration  # a started serve on PostgreSQL

PRICES = {"gpt-4o-mini": {"prompt": 0.15, "completion": 0.60}}
T0 = datetime.now(UTC) - timedelta(minutes=30)


@pytest.fixture(scope="module")
def portal() -> Iterator[Portal]:
    with started_portal(RAGPULSE_EXPORT_MODEL_PRICES=json.dumps(PRICES)) as p:
        yield p


def _result(n: int, session: str | None, minute: int, **kw: Any) -> TraceResult:
    fields: dict[str, Any] = {
        "trace_id": f"{n:032x}",
        "app": "chat-app",
        "question": f"question {n}",
        "answer": f"answer {n}",
        "model": "gpt-4o-mini",
        "session_id": session,
        "start_time": T0 + timedelta(minutes=minute),
        "end_time": T0 + timedelta(minutes=minute, seconds=2),
        "source": Source.OTLP,
    }
    t = Trace.model_validate({**fields, **kw})
    # received in the reverse of the turn order: the session lists by start time, not arrival
    return TraceResult(
        trace=t, outcome=TraceOutcome.NOT_SAMPLED, received_at=datetime.now(UTC) - timedelta(minutes=minute)
    )


def test_session_filter_and_session_in_turn_order(portal: Portal) -> None:
    seed(
        portal.db_url,
        [
            _result(31, "sess-a", 0, prompt_tokens=100, completion_tokens=10),
            _result(
                32,
                "sess-a",
                1,
                turns=(Turn(question="question 31", answer="answer 31"),),
                prompt_tokens=120,
                completion_tokens=17,
                total_prompt_tokens=160,
                total_completion_tokens=25,
                usage=(ModelUsage(model="gpt-4o-mini", prompt_tokens=160, completion_tokens=25, calls=2),),
            ),
            _result(33, "sess-b", 2, prompt_tokens=5, completion_tokens=5),
            _result(34, None, 3),
        ],
    )
    with portal.client() as c:
        items = c.get("/api/v1/traces", params={"session": "sess-a"}).json()["items"]
        assert [t["trace_id"] for t in items] == [f"{31:032x}", f"{32:032x}"]  # newest received first
        assert {t["session_id"] for t in items} == {"sess-a"}
        follow = items[1]
        assert (follow["model"], follow["prompt_tokens"], follow["completion_tokens"]) == (
            "gpt-4o-mini",
            120,
            17,
        )
        assert (follow["total_prompt_tokens"], follow["total_completion_tokens"]) == (160, 25)
        assert follow["app_cost"] == pytest.approx((160 * 0.15 + 25 * 0.60) / 1e6)

        s = c.get("/api/v1/sessions/sess-a").json()
        assert s["session_id"] == "sess-a"
        # turn order (by start time), not the order received (32 arrived first)
        assert [t["trace_id"] for t in s["traces"]] == [f"{31:032x}", f"{32:032x}"]
        assert (s["total_prompt_tokens"], s["total_completion_tokens"], s["truncated"]) == (260, 35, False)
        assert s["app_cost"] == pytest.approx((260 * 0.15 + 35 * 0.60) / 1e6)
        problem_detail(c.get("/api/v1/sessions/no-such-session"), 404)

        d = c.get(f"/api/v1/traces/{32:032x}").json()
        assert d["session_id"] == "sess-a"
        assert d["turns"] == [{"question": "question 31", "answer": "answer 31"}]
        assert d["usage"] == [
            {"model": "gpt-4o-mini", "prompt_tokens": 160, "completion_tokens": 25, "calls": 2}
        ]
        bare = c.get(f"/api/v1/traces/{34:032x}").json()
        assert (bare["session_id"], bare["prompt_tokens"], bare["usage"], bare["app_cost"]) == (
            None,
            None,
            [],
            None,
        )


def test_a_model_missing_from_the_price_table_has_tokens_and_no_cost(portal: Portal) -> None:
    seed(
        portal.db_url, [_result(41, "sess-c", 0, prompt_tokens=50, completion_tokens=7, model="in-house-llm")]
    )
    with portal.client() as c:
        d = c.get(f"/api/v1/traces/{41:032x}").json()
        assert (d["model"], d["prompt_tokens"], d["completion_tokens"]) == ("in-house-llm", 50, 7)
        assert d["app_cost"] is None
        s = c.get("/api/v1/sessions/sess-c").json()
        assert (s["total_prompt_tokens"], s["app_cost"]) == (50, None)
