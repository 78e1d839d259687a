import gc
import math
import weakref

import pytest
from pydantic import ValidationError

from ragpulse.model import Backend, Document, Judgement, JudgementStatus, Trace, normalize_trace_id


def test_trace_id_normalised_hex_lowercased_other_kept() -> None:
    assert normalize_trace_id("94FCBDE9A2D1349A3A807C1AB886D48A") == "94fcbde9a2d1349a3a807c1ab886d48a"
    assert (
        normalize_trace_id(" 0E6B1A2C-1234-4ABC-9DEF-0123456789AB ") == "0e6b1a2c-1234-4abc-9def-0123456789ab"
    )
    assert normalize_trace_id("Order-42/Abc") == "Order-42/Abc"
    with pytest.raises(ValueError):
        normalize_trace_id("  ")


def test_trace_contexts_from_documents_then_context_string() -> None:
    t = Trace(trace_id="t1", documents=[{"id": "a", "content": "A"}, "B", {"id": "c", "content": ""}])
    assert t.contexts == ["A", "B"]
    assert [d.rank for d in t.documents] == [0, 1, 2]
    assert t.doc_ids == ["a", None, "c"]
    assert Trace(trace_id="t2", context="ctx").contexts == ["ctx"]
    assert Trace(trace_id="t3", documents=None, context="  ").contexts == []


def test_keywords_from_string_split_on_commas() -> None:
    t = Trace(trace_id="t", keywords="报销, 审批，发票")
    assert t.keywords == ("报销", "审批", "发票")
    assert Trace(trace_id="t", keywords=[]).keywords is None


def test_judgement_invariants() -> None:
    j = Judgement(
        judge="k", version="v", backend=Backend.HEURISTIC, score=0.5, passed=True, status=JudgementStatus.OK
    )
    assert j.outcome == "pass"
    with pytest.raises(ValidationError):
        Judgement(
            judge="k",
            version="v",
            backend=Backend.LLM,
            score=math.nan,
            passed=False,
            status=JudgementStatus.OK,
        )
    with pytest.raises(ValidationError):
        Judgement(
            judge="k", version="v", backend=Backend.LLM, score=1.2, passed=True, status=JudgementStatus.OK
        )
    with pytest.raises(ValidationError):
        Judgement(
            judge="k", version="v", backend=Backend.LLM, score=0.0, status=JudgementStatus.ERROR, reason="x"
        )
    e = Judgement(
        judge="k",
        version="v",
        backend=Backend.LLM,
        status=JudgementStatus.ERROR,
        reason="unparseable: " + "x" * 1000,
    )
    assert len(e.reason) == 512
    assert e.reason_code == "unparseable"
    assert e.outcome == "error"


def test_older_attribute_keys_become_typed_trace_fields_and_go_back_on_the_wire() -> None:
    from ragpulse.model import Trace

    t = Trace(
        trace_id="t",
        attributes={
            "ragpulse.not_evaluable": " rag_endpoint_failed: HTTP 500 ",
            "reference_contexts": ["ref"],
            "context_labels": [1, 0],
            "labelled_contexts": ["c1", "c2"],
            "labelled_doc_ids": ["d1", "d2"],
            "test_set": "kb",
        },
    )
    assert t.not_evaluable == "rag_endpoint_failed: HTTP 500"
    assert t.reference_contexts == ("ref",)
    assert t.context_labels == (True, False)
    assert t.labelled_contexts == ("c1", "c2")
    assert t.labelled_doc_ids == ("d1", "d2")
    assert t.attributes == {"test_set": "kb"}
    wire = t.wire_attributes()
    assert wire == {
        "test_set": "kb",
        "ragpulse.not_evaluable": "rag_endpoint_failed: HTTP 500",
        "reference_contexts": ["ref"],
        "context_labels": [True, False],
        "labelled_contexts": ["c1", "c2"],
        "labelled_doc_ids": ["d1", "d2"],
    }
    assert Trace(trace_id="t", attributes=wire) == t
    # a typed value wins over an older key
    both = Trace(trace_id="t", not_evaluable="trace_error", attributes={"ragpulse.not_evaluable": "x"})
    assert both.not_evaluable == "trace_error"
    assert both.attributes == {}


def test_new_trace_fields_default_to_nothing_known() -> None:
    from ragpulse.model import Trace

    t = Trace(trace_id="t")
    assert t.not_evaluable is None
    assert t.answer_span_id is None
    assert t.answer_candidates == ()
    assert t.time_replaced is False
    assert t.error is None
    assert t.context_labels is None
    assert t.reference_contexts == ()
    assert t.wire_attributes() == {}


def test_content_hash_memo_keeps_no_trace_alive_and_follows_copies() -> None:
    t = Trace(trace_id="memo", question="q", answer="a" * 100_000, documents=[Document(content="c")])
    h = t.content_hash
    assert t.content_hash == h  # remembered
    changed = t.model_copy(update={"answer": "b"})
    assert changed.content_hash != h  # a changed copy is another object, hashed afresh
    ref = weakref.ref(t)
    del t
    gc.collect()
    assert ref() is None  # the memo held only a weak reference


def test_a_session_id_is_the_id_the_store_keeps() -> None:
    """A NUL (PostgreSQL cannot store it) or another control character is dropped and a lone surrogate becomes
    U+FFFD in the trace's session id itself, so the engine's look-up of earlier turns uses the stored id (a NUL
    in ``session.id`` made the look-up fail with "invalid byte sequence" while the trace was stored)."""
    from ragpulse.model import Trace

    assert Trace(trace_id="t", session_id="sess-ctl\x00\u200b").session_id == "sess-ctl\u200b"
    assert Trace(trace_id="t", session_id="a\tb\n").session_id == "ab"
    assert Trace(trace_id="t", session_id="s\ud800").session_id == "s\ufffd"
    assert Trace(trace_id="t", session_id="\x00").session_id is None
