"""The text caches of the heuristic judges are bounded in characters, not only in entries: a huge text is
computed but never kept (one 10 MB answer used to stay cached with its 2 M tokens)."""

from __future__ import annotations

import pytest

from ragpulse.judges.text import lexical, tokens
from ragpulse.judges.text.cache import MAX_CACHE_CHARS, MAX_CACHED_TEXT_CHARS, TextCache, text_cache

_CACHES = {
    "tokens": tokens._token_lists,
    "is_abstention": tokens._is_abstention_cached,
    "sentence_spans": lexical._sentence_spans_cached,
    "chunk_index": lexical.chunk_index,
    "names": lexical._names,
}

_SENTENCE = "Harlow Bank appointed Mira Osei as chief risk officer in 2024. "


def _text_of(chars: int) -> str:
    return (_SENTENCE * (chars // len(_SENTENCE) + 1))[:chars]


def test_the_documented_limits() -> None:
    assert MAX_CACHED_TEXT_CHARS == 100_000
    assert MAX_CACHE_CHARS == 1_000_000
    for fn in _CACHES.values():
        assert fn.cache.max_text_chars == MAX_CACHED_TEXT_CHARS
        assert fn.cache.max_chars == MAX_CACHE_CHARS


def _use_every_helper(text: str) -> None:
    tokens.tokens(text)
    tokens.content_tokens(text)
    tokens.is_abstention(text)
    lexical.sentence_spans(text)
    lexical.chunk_index(text)
    lexical.swapped_slot("Tom Varga was appointed chief risk officer.", text)  # _names of the chunk


@pytest.mark.integration  # slow check (~1 s CPU): the integration lane, docs/dev/testing.md
def test_a_huge_text_is_computed_but_kept_in_no_cache() -> None:
    huge = _text_of(2_000_000)
    _use_every_helper(huge)
    for name, fn in _CACHES.items():
        assert huge not in fn.cache, name
        assert fn.cache.chars <= MAX_CACHE_CHARS, name
    # the same results as the cached path gives a short text
    one = tokens.tokens(_SENTENCE)
    assert tokens.tokens(huge)[: len(one)] == one
    assert len(lexical.sentence_spans(huge)) == 2_000_000 // len(_SENTENCE) + 1
    assert "osei" in lexical.chunk_index(huge).tokens


def test_texts_up_to_the_limit_are_kept_one_more_character_is_not() -> None:
    at_limit = _text_of(MAX_CACHED_TEXT_CHARS - 1) + "x"
    over = _text_of(MAX_CACHED_TEXT_CHARS) + "y"
    _use_every_helper(at_limit)
    _use_every_helper(over)
    for name, fn in _CACHES.items():
        assert at_limit in fn.cache, name
        assert over not in fn.cache, name


def test_the_character_budget_evicts_the_least_recently_used() -> None:
    calls: list[str] = []

    def upper(text: str) -> str:
        calls.append(text)
        return text.upper()

    cache = TextCache(upper, max_entries=100, max_chars=10, max_text_chars=4)
    get = cache.lookup
    for t in ("aaa", "bbb", "ccc"):
        assert get(t) == t.upper()
    assert (len(cache), cache.chars) == (3, 9)
    assert get("aaa") == "AAA"  # a hit: now the most recently used
    assert calls == ["aaa", "bbb", "ccc"]
    assert get("dd") == "DD"  # 11 characters: "bbb" (least recently used) goes
    assert "bbb" not in cache
    assert ("aaa" in cache, "ccc" in cache, "dd" in cache) == (True, True, True)
    assert cache.chars == 8
    assert get("eeeee") == "EEEEE"  # over max_text_chars: computed, not kept
    assert "eeeee" not in cache
    assert cache.chars == 8
    cache.cache_clear()
    assert (len(cache), cache.chars) == (0, 0)


def test_the_entry_bound_still_holds() -> None:
    @text_cache(max_entries=2, max_chars=100, max_text_chars=10)
    def length(text: str) -> int:
        return len(text)

    for t in ("a", "bb", "ccc"):
        assert length(t) == len(t)
    assert len(length.cache) == 2
    assert "a" not in length.cache
    assert length.__wrapped__("dddd") == 4
    length.cache_clear()
    assert len(length.cache) == 0


@pytest.mark.parametrize(
    ("entries", "chars", "text_chars"),
    [(0, 10, 5), (5, 4, 5), (5, 10, -1)],
    ids=["entries", "budget", "text"],
)
def test_bad_bounds_are_refused(entries: int, chars: int, text_chars: int) -> None:
    with pytest.raises(ValueError, match="max_entries > 0"):
        TextCache(str.upper, max_entries=entries, max_chars=chars, max_text_chars=text_chars)
