"""The ASCII fast paths of the heuristic judges' text helpers give what the general code gives (issue 15 item 2:
same verdicts at less CPU)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from ragpulse.judges.text import lexical, tokens

# printable ASCII with the characters the patterns care about over-represented
_ASCII = st.text(
    alphabet=st.sampled_from(list("aZ09_.'- ,;:!?\n\tQxMk") + [chr(c) for c in range(32, 127)]), max_size=80
)


@settings(max_examples=400, deadline=None)
@given(_ASCII)
def test_ascii_tokens_equal_the_general_segmenter(text: str) -> None:
    assert tokens._tokens_cached.__wrapped__(text) == tokens._segment(text)


def _names_by_scanning_every_word(text: str) -> frozenset[str]:
    """:func:`lexical._names` as it was: every ``\\w+`` run checked."""
    return frozenset(
        m.group(0).lower()
        for m in re.finditer(r"\w+", text)
        if lexical._named_at(text, m.group(0), m.start())
    )


@settings(max_examples=400, deadline=None)
@given(_ASCII)
def test_names_read_only_capitalised_runs_and_find_the_same(text: str) -> None:
    assert lexical._names.__wrapped__(text) == _names_by_scanning_every_word(text)


def test_examples() -> None:
    text = "Harlow Bank appointed Mira Osei. Her predecessor, Tom Varga, moved to x_Lisbon and GRANT."
    assert lexical._names.__wrapped__(text) == frozenset({"bank", "mira", "osei", "tom", "varga"})
    assert tokens.tokens("Use df.write.csv, don't re-run it: 3.5 GB!") == [
        "use", "df.write.csv", "don't", "re-run", "it", "3.5", "gb",
    ]  # fmt: skip
