"""Golden versions: every built-in judge's ``version`` under fixed settings, as literal strings.

A judge's version is the key under which its judgements are stored; a new version makes ``rejudge`` and
replay judge history again. A refactor that changes no verdict must therefore change no version. The
expected values below are literals copied from ``main`` (commit 0a55620, before the judges were moved);
they are never recomputed here. When a change of behaviour is *meant* to give a judge a new version, edit
its literal here (keeping the old one in a comment) and list the judge under "## Unreleased" in CHANGELOG.md.
"""

from __future__ import annotations

from typing import Any

import pytest

from ragpulse.config import Settings
from ragpulse.judges.registry import build_judges

#: The judge model settings of the LLM cases (nothing is sent: building a judge makes no request).
LLM: dict[str, Any] = {
    "judge_base_url": "http://127.0.0.1:9/v1",
    "judge_model": "judge-golden",
    "judge_api_key": "sk-golden",
}

CHECKLIST: dict[str, Any] = {
    "version": "1",
    "mode": "share",
    "threshold": 0.5,
    "apps": ["a"],
    "items": [
        {"id": "has_days", "kind": "regex", "pattern": "\\d+ days"},
        {
            "id": "polite",
            "kind": "rubric",
            "rubric": "The answer is polite.",
            "offline": {"kind": "contains", "any": ["please"]},
        },
    ],
}

#: (backend, judge, options, version). Options valid for one backend stay valid for the other.
GOLDEN: list[tuple[str, str, dict[str, Any], str]] = [
    # was 32e8c9111615 (main 0a55620): skips scripts it cannot segment (issue 10 item 7)
    # was 30fab55c1578 (main 828428b): question_coverage/v2, word forms, answer types (issue 29)
    # was 7594c4d7d8c2 (issue 29 merge): question_coverage/v3, irregular forms by simplemma lemmas
    # was 9eb0fa8081f8: reads the last judge.history_turns earlier turns of a conversation (issue 28)
    # was 031535aaaa6c: question_coverage/v4, a stance on a yes/no question is no echo, no answer-type bonus without a
    # question term (but for yes/no and procedure answers)
    # was 9390f7185ec2: question_coverage/v5, a yes/no word before words of none of the question's terms is no
    # answer, a Chinese noun character cut off a compound joins it, Chinese procedures stated as 在…申请
    ("heuristic", "relevancy", {}, "61a8259bb035"),
    # was 8dfb3744ec18 (main 6f8c9fc): claim causes, retrieval_miss / generation_error (issue 14 §1)
    # was 0fec9fe1b69e (main 0a55620): unsupported_language (item 7), swap check sentence_support/v2 (item 8)
    # was baf7a19f2bcf (main 828428b): sentence_support/v3, chat talk, context edits, weakest cap (issue 29)
    # was 40ac5b644849: reads the last judge.history_turns earlier turns of a conversation (issue 28)
    # was 426d48162a83: sentence_support/v4, a Chinese clause's dropped middle is not a swap
    # was 8435c4b5f324: sentence_support/v5, a stance on a yes/no question is no echo, answer clauses in swaps
    # was b9f0022fd9e0: sentence_support/v5
    # sentence_support/v6: polarity of paraphrases, a name replaced by a common word, bare yes/no
    ("heuristic", "faithfulness", {}, "9569050be541"),
    # LLM-only options leave the offline judge's version alone.
    # was 8dfb3744ec18 (main 6f8c9fc): claim causes (issue 14 §1)
    # was 40ac5b644849: reads the last judge.history_turns earlier turns of a conversation (issue 28)
    # was 426d48162a83: sentence_support/v4
    # was 8435c4b5f324: sentence_support/v5
    # was b9f0022fd9e0: sentence_support/v5
    ("heuristic", "faithfulness", {"mode": "binary"}, "9569050be541"),
    # was 3822e0d57dcd (main 0a55620): skips scripts it cannot segment (issue 10 item 7)
    ("heuristic", "keyword", {}, "0603ef760474"),
    # was 1ec92fa6a325 (main 0a55620): skips scripts it cannot segment (issue 10 item 7)
    ("heuristic", "context_precision", {}, "ac751f35aa18"),
    # was 07c107d1d22f (main 0a55620): skips scripts it cannot segment (issue 10 item 7)
    ("heuristic", "context_recall", {}, "50a2a7ee319d"),
    # was 8a8aa404301f (main 0a55620): skips scripts it cannot segment (issue 10 item 7)
    ("heuristic", "context_relevance", {}, "ef5bdd661928"),
    # was 72cc374bd7d1 (main 0a55620): skips scripts it cannot segment (issue 10 item 7)
    ("heuristic", "answer_correctness", {}, "7a232538f828"),
    # was a06762f87e77 (main 0a55620): skips scripts it cannot segment (issue 10 item 7)
    # was 79c56ea1bd02 (main 828428b): question_coverage/v2 (issue 29)
    # was 41de9a39ca2b: question_coverage/v3
    # was 0900c981281a: reads the last judge.history_turns earlier turns of a conversation (issue 28)
    # was a9249b925653: question_coverage/v4
    # was 585ba9a12ce7: question_coverage/v5
    ("heuristic", "relevancy", {"threshold": 0.6}, "b67429875f79"),
    # was e731a6ecbc22 (main 0a55620): unsupported_language (item 7), swap check sentence_support/v2 (item 8)
    # was 7e1dd962a85c (main 6f8c9fc): claim causes (issue 14 §1)
    # was d4e750356fde (main 828428b): sentence_support/v3 (issue 29)
    # was 0b7ccfbbfa94: reads the last judge.history_turns earlier turns of a conversation (issue 28)
    # was 5f123a8a14c6: sentence_support/v4
    # was d92c332eebec: sentence_support/v5
    # was 95b5d4c8232b: sentence_support/v5
    ("heuristic", "faithfulness", {"threshold": 0.7}, "498a46bf3069"),
    # was 5a6e472cfd52 (main 0a55620): skips scripts it cannot segment (issue 10 item 7)
    ("heuristic", "keyword", {"threshold": 0.5}, "db860ab2d8a6"),
    # was 3846d703ebae (main 0a55620): skips scripts it cannot segment (issue 10 item 7)
    ("heuristic", "context_precision", {"method": "heuristic", "k": 3}, "f491872b4088"),
    # was 2087f022d237 (main 0a55620): skips scripts it cannot segment (issue 10 item 7)
    ("heuristic", "context_recall", {"method": "labels", "min_coverage": 0.7}, "fe082b060044"),
    # was d1cd9f0deeb8 (main 0a55620): skips scripts it cannot segment (issue 10 item 7)
    ("heuristic", "answer_correctness", {"weights": [0.5, 0.5]}, "04a64af1d2e9"),
    # was dac2074cf8ec (main 0a55620): reply protocol 2 (issue 10 item 5)
    # was 9aedd47cc179 (main 7c28a6e): reply protocol 3 (issue 24)
    # was eec511c03e96: reads the last judge.history_turns earlier turns of a conversation (issue 28)
    ("llm", "relevancy", {}, "66830102f066"),
    # was e9d5007297b7 (main 0a55620): reply protocol 2 (issue 10 item 5)
    # was 3cb2cde0d2fd (main 7c28a6e): reply protocol 3 (issue 24)
    # was f6499a11c663: reads the last judge.history_turns earlier turns of a conversation (issue 28)
    ("llm", "relevancy", {"mode": "with_context", "graded": True}, "19886ea10776"),
    # was 6b20b2b71ece (main 0a55620): reply protocol 2 (issue 10 item 5)
    # was 7a98d855be3d (main 7c28a6e): reply protocol 3 (issue 24)
    # was 1c17d5922704: reads the last judge.history_turns earlier turns of a conversation (issue 28)
    ("llm", "relevancy", {"threshold": 0.7, "language": "zh", "max_tokens": 256}, "3471aca6decc"),
    # was 6278e529944c (main 0a55620): reply protocol 2 (issue 10 item 5)
    # was 8c51014070c5 (main 6f8c9fc): claim causes, faithfulness_attribution prompt (issue 14 §1)
    # was f1cf4bf3b011 (main 7c28a6e): reply protocol 3 (issue 24)
    # was b20cefacce15: reads the last judge.history_turns earlier turns of a conversation (issue 28)
    ("llm", "faithfulness", {}, "e8ee1cb2b256"),
    # was 0ea15fadf211 (main 0a55620): reply protocol 2 (issue 10 item 5)
    # was cb23f6c50610 (main 7c28a6e): reply protocol 3 (issue 24)
    # was a0fdcd2c18cc: reads the last judge.history_turns earlier turns of a conversation (issue 28)
    ("llm", "faithfulness", {"mode": "binary", "literal_match": True}, "a3db79838c7a"),
    # was 3a04e6cdfb1a (main 6f8c9fc): claim causes (issue 14 §1); new in issue 10 item 6
    # was 6b18de57a213 (main 7c28a6e): reply protocol 3 (issue 24)
    ("llm", "faithfulness", {"mode": "sentence_check"}, "92e315588f5c"),
    # was 3822e0d57dcd (main 0a55620): skips scripts it cannot segment (issue 10 item 7)
    ("llm", "keyword", {}, "0603ef760474"),
    # was 3f01e2546d08 (main 0a55620): reply protocol 2 (issue 10 item 5)
    # was 9b40ed7ea893 (main 7c28a6e): reply protocol 3 (issue 24)
    ("llm", "context_precision", {}, "1166519ec1c3"),
    # was 3b89522544c0 (main 0a55620): reply protocol 2 (issue 10 item 5)
    # was 5356da668afd (main 7c28a6e): reply protocol 3 (issue 24)
    ("llm", "context_recall", {}, "79642bdf8c7d"),
    # was 8e6f02df9832 (main 0a55620): reply protocol 2 (issue 10 item 5)
    # was e9a77bd6208f (main 7c28a6e): reply protocol 3 (issue 24)
    ("llm", "context_relevance", {}, "6840a33b4d77"),
    # was 39603930481a (main 0a55620): skips scripts it cannot segment (issue 10 item 7)
    ("llm", "context_relevance", {"method": "heuristic"}, "7fca3755da56"),
    # was d3d378c4e294 (main 0a55620): reply protocol 2 (issue 10 item 5)
    # was ea52824da766 (main 7c28a6e): reply protocol 3 (issue 24)
    ("llm", "answer_correctness", {}, "2a24aa22cf34"),
    ("heuristic", "golden_list", {}, "99a4a5ff42d3"),
    # was ece5877803bf (main 0a55620): reply protocol 2 (issue 10 item 5)
    # was 9b6aef611777 (main 7c28a6e): reply protocol 3 (issue 24)
    ("llm", "golden_list", {}, "7503f2c345e4"),
]


@pytest.mark.parametrize(
    ("backend", "name", "options", "version"),
    GOLDEN,
    ids=[f"{b}-{n}-{i}" for i, (b, n, _, _) in enumerate(GOLDEN)],
)
def test_judge_version_is_pinned(backend: str, name: str, options: dict[str, Any], version: str) -> None:
    kw: dict[str, Any] = dict(LLM) if backend == "llm" else {}
    settings = Settings(
        judge_options={name: options} if options else {},
        judge_checklists={"golden_list": CHECKLIST},
        **kw,
    )
    judge = build_judges(settings, [name])[name]
    assert judge.version == version
