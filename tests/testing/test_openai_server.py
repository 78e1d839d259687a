"""The scripted server speaks enough of the OpenAI API for the real openai client (both transports)."""

from __future__ import annotations

import asyncio
import json
import time

import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

from ragpulse.testing.openai_server import (
    LabelOracle,
    Phase,
    RecordedRequest,
    Reply,
    ScriptedOpenAIServer,
    context_length_exceeded,
)

MSG: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Is the sky blue?"}]


@pytest.mark.parametrize("transport", ["httpx", "aiohttp"])
async def test_scripted_reply_usage_and_retry_after(
    openai_server: ScriptedOpenAIServer, transport: str
) -> None:
    openai_server.script(Reply(status=429, retry_after=0.01), Reply(content="YES", completion_tokens=1))
    http_client = (
        openai.DefaultAioHttpClient() if transport == "aiohttp" else openai.DefaultAsyncHttpxClient()
    )
    async with openai.AsyncOpenAI(
        base_url=openai_server.base_url, api_key="k", max_retries=2, http_client=http_client
    ) as client:
        raw = await client.chat.completions.with_raw_response.create(model="m1", messages=MSG)
        out = raw.parse()
    assert out.choices[0].message.content == "YES"
    assert out.choices[0].finish_reason == "stop"
    assert out.usage is not None
    assert out.usage.completion_tokens == 1
    assert out.usage.prompt_tokens == 4  # ceil(len("Is the sky blue?") / 4)
    assert raw.retries_taken == 1
    reqs = openai_server.requests
    assert [r.retry_count for r in reqs] == [0, 1]
    assert reqs[0].model == "m1"
    assert reqs[0].prompt_text == "Is the sky blue?"


async def test_responder_error_status_and_in_flight(openai_server: ScriptedOpenAIServer) -> None:
    def responder(req: RecordedRequest) -> Reply | str:
        return Reply(content="NO", delay_s=0.2) if "blue" in req.prompt_text else "?"

    openai_server.reset(responder)
    async with openai.AsyncOpenAI(base_url=openai_server.base_url, api_key="k", max_retries=0) as client:
        outs = await asyncio.gather(
            *(client.chat.completions.create(model="m", messages=MSG) for _ in range(3))
        )
        assert [o.choices[0].message.content for o in outs] == ["NO"] * 3
        assert openai_server.max_in_flight == 3
        openai_server.script(Reply(status=503, error_message="down"))
        with pytest.raises(openai.InternalServerError, match="down"):
            await client.chat.completions.create(model="m", messages=MSG)


async def test_unscripted_request_is_a_400() -> None:
    with ScriptedOpenAIServer() as server:
        async with openai.AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=3) as client:
            with pytest.raises(openai.BadRequestError, match="unscripted"):
                await client.chat.completions.create(model="m", messages=MSG)
        assert len(server.requests) == 1
    server.stop()  # idempotent


async def test_judge_responder_fits_every_builtin_prompt(openai_server: ScriptedOpenAIServer) -> None:
    from ragpulse.config import Settings
    from ragpulse.judges.registry import build_judges
    from ragpulse.model import JudgementStatus, Trace
    from ragpulse.testing.openai_server import judge_responder

    openai_server.reset(judge_responder)
    settings = Settings(judge_base_url=openai_server.base_url, judge_model="m", judge_api_key="k")
    en = Trace(
        trace_id="a", question="What is the fee?", answer="There is no fee.", documents=["No fee applies."]
    )
    zh = Trace(trace_id="b", question="费用是多少？", answer="不收取任何费用。", documents=["不收费。"])
    for options in ({}, {"relevancy": {"graded": True}, "faithfulness": {"mode": "binary"}}):
        judges = build_judges(settings.replaced(judge_options=options), ["relevancy", "faithfulness"])
        for trace in (en, zh):
            for j in judges.values():
                res = await j.judge(trace)
                assert res.status is JudgementStatus.OK, res
                assert res.score == 1.0, res
        await judges["relevancy"].client.aclose()  # type: ignore[attr-defined]


# -- rules, provider errors, usage, encodings, schedule, oracle, records (through the real openai client) --


def _ask(text: str) -> list[ChatCompletionMessageParam]:
    return [{"role": "user", "content": text}]


async def test_rules_match_text_regex_and_model_in_order(openai_server: ScriptedOpenAIServer) -> None:
    by_text = openai_server.on("text rule", contains="cafeteria")
    by_regex = openai_server.on(Reply("regex rule", completion_tokens=7), regex=r"case-\d{3}\b", times=1)
    by_model = openai_server.on(lambda req: f"model rule for {req.model}", model="small")
    openai_server.script("queued first")
    async with openai.AsyncOpenAI(base_url=openai_server.base_url, api_key="k", max_retries=0) as client:

        async def ask(text: str, model: str = "m") -> str | None:
            out = await client.chat.completions.create(model=model, messages=_ask(text))
            return out.choices[0].message.content

        assert await ask("the cafeteria") == "queued first"  # the queue comes before the rules
        assert await ask("the cafeteria") == "text rule"
        assert await ask("case-123 is here") == "regex rule"
        assert await ask("case-123 again", model="small") == "model rule for small"  # regex rule used up
        with pytest.raises(openai.BadRequestError, match="unscripted"):
            await ask("case-123 a third time")
    assert (by_text.hits, by_regex.hits, by_model.hits) == (1, 1, 1)
    assert [r.status for r in openai_server.requests] == [200, 200, 200, 200, 400]


async def test_provider_400_keeps_openai_error_shape(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.script(context_length_exceeded(8192, 9100))
    async with openai.AsyncOpenAI(base_url=openai_server.base_url, api_key="k", max_retries=2) as client:
        with pytest.raises(openai.BadRequestError) as err:
            await client.chat.completions.create(model="m", messages=_ask("long"))
    assert err.value.status_code == 400
    assert err.value.code == "context_length_exceeded"
    assert err.value.type == "invalid_request_error"
    assert "maximum context length is 8192 tokens" in err.value.message
    assert "resulted in 9100 tokens" in err.value.message
    assert openai_server.request_count == 1  # a 400 is not retried


async def test_reply_without_usage_block(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.script(Reply("YES", include_usage=False), "YES")
    async with openai.AsyncOpenAI(base_url=openai_server.base_url, api_key="k", max_retries=0) as client:
        first = await client.chat.completions.create(model="m", messages=_ask("q"))
        second = await client.chat.completions.create(model="m", messages=_ask("q"))
    assert first.usage is None
    assert first.choices[0].message.content == "YES"
    assert second.usage is not None
    assert second.usage.total_tokens == 2  # ceil(1/4) + ceil(3/4)


async def test_non_utf8_body_with_status_200(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.script(Reply("是，相关。", encoding="gbk"), Reply(raw_body=b"\xff\xfe\x00garbage"))
    async with openai.AsyncOpenAI(base_url=openai_server.base_url, api_key="k", max_retries=0) as client:
        raw = await client.chat.completions.with_raw_response.create(model="m", messages=_ask("q"))
        assert raw.status_code == 200
        body = raw.http_response.content
        assert "是，相关。".encode("gbk") in body
        with pytest.raises(UnicodeDecodeError):
            body.decode("utf-8")
        raw2 = await client.chat.completions.with_raw_response.create(model="m", messages=_ask("q"))
        assert raw2.status_code == 200
        assert raw2.http_response.content == b"\xff\xfe\x00garbage"


@pytest.mark.integration  # slow check (43 requests with Retry-After and latency phases, ~2 s): the integration lane, docs/dev/testing.md
async def test_schedule_by_request_count_latency_and_seeded_429(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.reset(lambda req: "YES")
    openai_server.set_schedule(
        Phase(requests=3),
        Phase(requests=40, rate_429=0.5, retry_after_s=0.25),
        Phase(latency_s=0.2),
        seed=3,
    )
    async with openai.AsyncOpenAI(base_url=openai_server.base_url, api_key="k", max_retries=0) as client:
        statuses: list[int] = []
        for _ in range(43):
            try:
                await client.chat.completions.create(model="m", messages=_ask("q"))
                statuses.append(200)
            except openai.RateLimitError as e:
                assert e.response.headers["retry-after"] == "0.25"
                statuses.append(429)
        t0 = time.monotonic()
        await client.chat.completions.create(model="m", messages=_ask("q"))
        assert time.monotonic() - t0 >= 0.2
    reqs = openai_server.requests
    assert [r.phase for r in reqs] == [0] * 3 + [1] * 40 + [2]
    assert statuses[:3] == [200] * 3
    throttled = statuses[3:].count(429)
    assert 10 <= throttled <= 30  # about half of 40 ...
    assert [r.status for r in reqs[:43]] == statuses  # ... recorded per request ...
    again = [openai_server._throttled(r.index, Phase(rate_429=0.5)) for r in reqs[3:43]]
    assert [429 if t else 200 for t in again] == statuses[3:]  # ... and reproducible from the seed
    assert openai_server.phase_started_at(1) == reqs[3].received_at


async def test_schedule_switched_by_the_test(openai_server: ScriptedOpenAIServer) -> None:
    """A phase without a bound lasts until ``next_phase()``: however slow the machine, every request before the
    call is throttled and every one after it is not."""
    openai_server.reset(lambda req: "YES")
    openai_server.set_schedule(Phase(rate_429=1.0, retry_after_s=0.05), Phase(latency_s=0.0), Phase())
    start = openai_server.phase_started_at(0)
    assert start is not None
    assert openai_server.phase_started_at(1) is None  # not known before the test switches
    async with openai.AsyncOpenAI(base_url=openai_server.base_url, api_key="k", max_retries=0) as client:
        for _ in range(3):
            with pytest.raises(openai.RateLimitError) as ei:
                await client.chat.completions.create(model="m", messages=_ask("q"))
            assert ei.value.response.headers["retry-after"] == "0.05"
        assert openai_server.next_phase() == 1
        switched = openai_server.phase_started_at(1)
        out = await client.chat.completions.create(model="m", messages=_ask("q"))
        assert openai_server.next_phase() == 2
        assert openai_server.next_phase() == 2  # the last phase never ends
        await client.chat.completions.create(model="m", messages=_ask("q"))
    assert out.choices[0].message.content == "YES"
    reqs = openai_server.requests
    assert [(r.phase, r.status) for r in reqs] == [(0, 429)] * 3 + [(1, 200), (2, 200)]
    assert switched is not None
    assert reqs[2].received_at <= switched <= reqs[3].received_at
    openai_server.reset()
    with pytest.raises(RuntimeError, match="without a schedule"):
        openai_server.next_phase()


async def test_time_bounded_phase_bounds_are_known_ahead(openai_server: ScriptedOpenAIServer) -> None:
    """``duration_s`` (for benches): the phase starts are computed from the schedule's start, and a request
    falls in the phase its arrival time says — checked with bounds no machine gets near (an hour; zero)."""
    openai_server.reset(lambda req: "YES")
    openai_server.set_schedule(Phase(duration_s=3600.0, rate_429=1.0), Phase(duration_s=60.0), Phase())
    start = openai_server.phase_started_at(0)
    assert start is not None
    assert openai_server.phase_started_at(1) == start + 3600.0
    assert openai_server.phase_started_at(2) == start + 3660.0
    assert openai_server.phase_started_at(3) is None
    async with openai.AsyncOpenAI(base_url=openai_server.base_url, api_key="k", max_retries=0) as client:
        with pytest.raises(openai.RateLimitError):
            await client.chat.completions.create(model="m", messages=_ask("q"))
        openai_server.set_schedule(Phase(duration_s=0.0, rate_429=1.0), Phase(requests=1), Phase())
        for _ in range(2):
            await client.chat.completions.create(model="m", messages=_ask("q"))
    assert [(r.phase, r.status) for r in openai_server.requests] == [(0, 429), (1, 200), (2, 200)]
    reqs = openai_server.requests
    assert openai_server.phase_started_at(2) == reqs[2].received_at


async def test_label_oracle_seeded_error_rate(openai_server: ScriptedOpenAIServer) -> None:
    labels = {f"case-{i:03d}": i % 3 != 0 for i in range(100)}
    oracle = LabelOracle(labels, key=r"\b(case-\d{3})\b", p_correct=0.8, seed=11)
    openai_server.reset(oracle)
    async with openai.AsyncOpenAI(base_url=openai_server.base_url, api_key="k", max_retries=0) as client:

        async def ask(case: str) -> str | None:
            out = await client.chat.completions.create(model="m", messages=_ask(f"Judge {case}."))
            return out.choices[0].message.content

        said = await asyncio.gather(*(ask(c) for c in labels))
        with pytest.raises(openai.BadRequestError, match="no known key"):
            await ask("case-999")
    given = {a.key: a.given for a in oracle.answers}
    assert [s.split("\n")[0] if s else s for s in said] == ["YES" if given[c] else "NO" for c in labels]
    right = sum(a.correct for a in oracle.answers)
    assert 68 <= right <= 92  # 80 % of 100, seeded
    # the same seed and key always give the same answer, whatever the order of arrival
    again = LabelOracle(labels, key=r"\b(case-\d{3})\b", p_correct=0.8, seed=11)
    assert all(again.is_right_on(a.key) == a.correct for a in oracle.answers)
    assert sum(LabelOracle(labels, p_correct=1.0).is_right_on(c) for c in labels) == 100


async def test_label_oracle_keyed_by_answer_text_in_judge_format(openai_server: ScriptedOpenAIServer) -> None:
    oracle = LabelOracle({"Refunds take 5 days.": True, "Refunds take 5 days and a form.": False})
    openai_server.reset(oracle)
    prompts = {
        "Answer: Refunds take 5 days and a form.\nReply YES or NO.": "NO",  # the longest key that occurs
        'Answer: Refunds take 5 days.\nReply {"score": n}': json.dumps(
            {"score": 3, "reason": "scripted verdict"}
        ),
        "回答: Refunds take 5 days.\n第一行只写是或否": "是",
    }
    async with openai.AsyncOpenAI(base_url=openai_server.base_url, api_key="k", max_retries=0) as client:
        for prompt, expected in prompts.items():
            out = await client.chat.completions.create(model="m", messages=_ask(prompt))
            content = out.choices[0].message.content
            assert content is not None
            assert content.startswith(expected)
    assert [a.truth for a in oracle.answers] == [False, True, True]


async def test_records_arrival_times_and_waits_for_requests(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.reset(lambda req: Reply("YES", delay_s=0.05))
    openai_server.embeddings = {"a": [1.0, 0.0]}
    before = time.monotonic()
    async with openai.AsyncOpenAI(base_url=openai_server.base_url, api_key="k", max_retries=0) as client:
        calls = asyncio.gather(
            *(client.chat.completions.create(model="m", messages=_ask(f"q{i}")) for i in range(4))
        )
        reqs = await openai_server.wait_for_requests_async(4, timeout_s=5)
        await calls
        emb = await client.embeddings.create(model="e", input=["a"])
    assert emb.data[0].embedding == [1.0, 0.0]
    assert len(reqs) >= 4
    everything = openai_server.requests
    assert openai_server.request_count == 5
    assert [r.index for r in everything] == [0, 1, 2, 3, 4]
    assert [r.path for r in everything] == ["/v1/chat/completions"] * 4 + ["/v1/embeddings"]
    assert sorted(r.user_text for r in everything[:4]) == ["q0", "q1", "q2", "q3"]
    times = [r.received_at for r in everything]
    assert times == sorted(times)
    assert times[0] >= before
    with pytest.raises(TimeoutError, match="5 of 6 requests"):
        openai_server.wait_for_requests(6, timeout_s=0.05)


async def test_refused_parameters_get_openais_400(openai_server: ScriptedOpenAIServer) -> None:
    """``refuse``: max_tokens refused whenever sent, temperature unless 1, and the refusal consumes no
    queued reply."""
    openai_server.refuse("max_tokens")
    openai_server.refuse("temperature", allowed=(1,))
    openai_server.script("YES")
    async with openai.AsyncOpenAI(base_url=openai_server.base_url, api_key="k", max_retries=0) as client:
        with pytest.raises(openai.BadRequestError) as caught:
            await client.chat.completions.create(model="o9", messages=MSG, max_tokens=5)
        assert caught.value.code == "unsupported_parameter"
        assert caught.value.param == "max_tokens"
        assert "Use 'max_completion_tokens' instead." in caught.value.message
        with pytest.raises(openai.BadRequestError) as caught:
            await client.chat.completions.create(model="o9", messages=MSG, temperature=0.0)
        assert (caught.value.code, caught.value.param) == ("unsupported_value", "temperature")
        ok = await client.chat.completions.create(
            model="o9", messages=MSG, max_completion_tokens=5, temperature=1
        )
    assert ok.choices[0].message.content == "YES"
    assert [r.status for r in openai_server.requests] == [400, 400, 200]


async def test_response_format_refusal_only_for_its_model(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.refuse("response_format", model="no-schema")
    openai_server.script("{}", "{}")
    fmt = {"type": "json_object"}
    async with openai.AsyncOpenAI(base_url=openai_server.base_url, api_key="k", max_retries=0) as client:
        with pytest.raises(openai.BadRequestError) as caught:
            await client.post(
                "/chat/completions",
                cast_to=object,
                body={"model": "no-schema", "messages": MSG, "response_format": fmt},
            )
        assert caught.value.param == "response_format"
        out = await client.post(
            "/chat/completions",
            cast_to=object,
            body={"model": "other", "messages": MSG, "response_format": fmt},
        )
    assert isinstance(out, dict)
    assert out["choices"][0]["message"]["content"] == "{}"
    assert openai_server.requests[1].body["response_format"] == fmt


async def test_content_blocks_reasoning_fields_and_reasoning_tokens(
    openai_server: ScriptedOpenAIServer,
) -> None:
    blocks = (
        {"type": "thinking", "thinking": [{"type": "text", "text": "Let me see."}]},
        {"type": "text", "text": "NO"},
    )
    openai_server.script(
        Reply(content_blocks=blocks, reasoning_content="R1 thoughts", reasoning="other thoughts", reasoning_tokens=30,
              prompt_tokens=7, completion_tokens=None),
        Reply("YES", reasoning_tokens=40, reasoning_in_completion=False, prompt_tokens=7, completion_tokens=2),
    )  # fmt: skip
    async with openai.AsyncOpenAI(base_url=openai_server.base_url, api_key="k", max_retries=0) as client:
        first = await client.post("/chat/completions", cast_to=object, body={"model": "m", "messages": MSG})
        second = await client.post("/chat/completions", cast_to=object, body={"model": "m", "messages": MSG})
    assert isinstance(first, dict)
    assert isinstance(second, dict)
    message = first["choices"][0]["message"]
    assert message["content"] == [dict(b) for b in blocks]
    assert (message["reasoning_content"], message["reasoning"]) == ("R1 thoughts", "other thoughts")
    # OpenAI's convention: reasoning inside completion_tokens (default count: ceil(0 / 4) + 30).
    assert first["usage"] == {
        "prompt_tokens": 7,
        "completion_tokens": 30,
        "total_tokens": 37,
        "completion_tokens_details": {"reasoning_tokens": 30},
    }
    # xAI's convention: reasoning beside completion_tokens, in total_tokens.
    assert second["usage"] == {
        "prompt_tokens": 7,
        "completion_tokens": 2,
        "total_tokens": 49,
        "completion_tokens_details": {"reasoning_tokens": 40},
    }
    assert "reasoning_content" not in second["choices"][0]["message"]


async def test_streamed_reply_with_usage_chunk(openai_server: ScriptedOpenAIServer) -> None:
    """``stream=True`` answers server-sent chunks the real client reassembles; usage arrives last when asked."""
    openai_server.stream_chunk_chars = 4
    text = "Probation allows two remote days."
    openai_server.script(Reply(text, prompt_tokens=11, completion_tokens=7), "plain")
    async with openai.AsyncOpenAI(base_url=openai_server.base_url, api_key="k", max_retries=0) as client:
        stream = await client.chat.completions.create(
            model="m", messages=_ask("q"), stream=True, stream_options={"include_usage": True}
        )
        chunks = [c async for c in stream]
        second = await client.chat.completions.create(model="m", messages=_ask("q"), stream=True)
        plain = [c async for c in second]
    pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert "".join(pieces) == text
    assert len(pieces) == 9  # 33 characters in pieces of 4
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (11, 7)
    assert all(c.usage is None for c in plain)
    assert "".join(c.choices[0].delta.content or "" for c in plain if c.choices) == "plain"


@pytest.mark.parametrize("stream", [False, True])
async def test_tool_call_reply(openai_server: ScriptedOpenAIServer, stream: bool) -> None:
    """A reply with ``tool_calls`` is a function call the real client parses, streamed or not."""
    openai_server.script(Reply(tool_calls=({"name": "search_kb", "arguments": {"query": "remote days"}},)))
    async with openai.AsyncOpenAI(base_url=openai_server.base_url, api_key="k", max_retries=0) as client:
        if stream:
            chunks = [
                c
                async for c in await client.chat.completions.create(
                    model="m", messages=_ask("q"), stream=True
                )
            ]
            calls = [tc for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or []]
            finish = [c.choices[0].finish_reason for c in chunks if c.choices][-1]
            name, args = calls[0].function.name, calls[0].function.arguments  # type: ignore[union-attr]
        else:
            out = await client.chat.completions.create(model="m", messages=_ask("q"))
            msg = out.choices[0].message
            assert msg.content is None
            assert msg.tool_calls is not None
            fn = msg.tool_calls[0].function  # type: ignore[union-attr]
            name, args, finish = fn.name, fn.arguments, out.choices[0].finish_reason
    assert (name, json.loads(args or "{}"), finish) == ("search_kb", {"query": "remote days"}, "tool_calls")
