"""From OTLP traffic to the highlighted sentence: traces sent with ``ragpulse send --to otlp`` to a running
serve are judged by the offline judges; the failing one is found in Live traffic and its unsupported sentence is
highlighted from the faithfulness judgement's per-claim details."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser

from portal_browser import PortalPage
from portal_testutil import Portal, cli, started_portal
from testsupport import free_port

pytestmark = pytest.mark.integration

CONTEXT = "Refunds are paid within five days of receiving the returned item."
GOOD = "Refunds are paid within five days of receiving the item."
BAD = (
    "Refunds are paid within five days of receiving the item. Every customer also gets a free flight to Mars."
)


@pytest.fixture(scope="module")
def otlp_portal() -> Iterator[tuple[Portal, int]]:
    port = free_port()
    with started_portal(
        RAGPULSE_OTLP_HTTP_ADDRESS=f"127.0.0.1:{port}",
        RAGPULSE_OTLP_ROOT_GRACE_S="0",
        RAGPULSE_JUDGE_ENABLED="faithfulness,relevancy",
    ) as p:
        yield p, port


def test_failing_otlp_trace_is_found_and_highlighted(
    browser: Browser, otlp_portal: tuple[Portal, int], tmp_path: Path
) -> None:
    portal, port = otlp_portal
    events = tmp_path / "events.jsonl"
    rows = [
        {
            "traceId": "a1" * 16,
            "app": "otlp-shop",
            "question": "How fast are refunds?",
            "answer": GOOD,
            "contexts": [CONTEXT],
        },
        {
            "traceId": "b2" * 16,
            "app": "otlp-shop",
            "question": "How fast are refunds?",
            "answer": BAD,
            "contexts": [CONTEXT],
        },
    ]
    events.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    sent = cli(portal.db_url, "send", str(events), "--to", "otlp", "--endpoint", f"http://127.0.0.1:{port}")
    assert sent.returncode == 0, sent.stderr
    page = PortalPage(browser, portal, 1280, 900)
    try:
        p = page.page
        deadline = time.monotonic() + 60
        while True:  # the traces are judged asynchronously: reload until the failing one is listed
            page.goto("/traffic?since=1h&app=otlp-shop&judge=faithfulness&outcome=fail")
            rows_shown = p.query_selector_all("#traces tbody tr[data-trace]")
            if rows_shown:
                break
            assert time.monotonic() < deadline, "the failing trace never showed up in Live traffic"
            time.sleep(0.2)
        assert [r.get_attribute("data-trace") for r in rows_shown] == ["b2" * 16]
        p.click(f"#traces tr[data-trace='{'b2' * 16}'] td a >> nth=1")
        p.wait_for_url(re.compile("/traces/" + "b2" * 16))
        marks = [m.inner_text() for m in p.query_selector_all("#answer mark.unsupported")]
        assert marks == ["Every customer also gets a free flight to Mars."]
        assert p.inner_text("#answer") == BAD
        assert "otlp" in p.inner_text("main")
        # the span tree the OTLP receiver kept (issue 31): the root, then its retriever and LLM spans
        tree = [
            (r.get_attribute("data-depth"), p.inner_text(f"#spans tbody tr:nth-child({i}) .span-name"),
             p.inner_text(f"#spans tbody tr:nth-child({i}) td:nth-child(2)"))
            for i, r in enumerate(p.query_selector_all("#spans tbody tr"), 1)
        ]  # fmt: skip
        assert tree == [("0", "rag", "CHAIN"), ("1", "retrieve", "RETRIEVER"), ("1", "generate", "LLM")]
    finally:
        page.close()
