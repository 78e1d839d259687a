"""The memo of the heuristic text helpers: an LRU cache of a function of one text, bounded in bytes.

The judges of one trace ask for the same tokens, sentences and chunk indexes several times (the faithfulness
judge tokenises its best chunk again for every sentence it checks for swapped names), and the chunks of a
knowledge base come back across traces, so :mod:`ragpulse.judges.text.tokens` and
:mod:`ragpulse.judges.text.lexical` memoise them. A cache bounded only in entries (``functools.lru_cache``)
keeps texts of any size: one 10 MB answer kept its 2 M-token tuple (~140 MB) until 4,096 other texts had
pushed it out. A :class:`TextCache` is bounded three ways:

* a text longer than :data:`MAX_CACHED_TEXT_CHARS` (100,000 characters, the default ``judge.max_text_chars``:
  longer texts are not judged at all unless that setting is raised) is computed every time and never kept;
* at most ``max_entries`` texts are kept;
* the kept texts add up to at most ``max_chars`` characters (:data:`MAX_CACHE_CHARS`, 1,000,000, by default).

What a cached value costs grows with its text (tokens: ~11 bytes per character of English, ~50 of Chinese), so
the character budget bounds the caches in bytes: filled with texts of 1,000 to 100,000 characters, the five of
them held at most ~26 MB of English or ~53 MB of Chinese, however many texts went through (docs/judges.md,
"Long texts and memory"). A per-text limit of 20,000 characters would keep every hit of normal traces too, but
made a trace with a 50,000-character Chinese context 20 times slower (its tokens computed again for every
sentence). Eviction is least recently used; values are computed outside the lock, and a text computed twice at
once by two threads is kept once. The cost against ``functools.lru_cache``: ~60 ns a hit, ~0.3 µs a miss
(about 1 % of the offline judges' instructions per trace).
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar, cast

__all__ = ["MAX_CACHED_TEXT_CHARS", "MAX_CACHE_CHARS", "CachedFn", "TextCache", "text_cache"]

#: Texts longer than this (characters) are never cached: computed every time they are asked for.
MAX_CACHED_TEXT_CHARS = 100_000
#: Default budget of one cache: the characters of all the texts it keeps.
MAX_CACHE_CHARS = 1_000_000

V = TypeVar("V")
_MISSING: Any = object()
V_co = TypeVar("V_co", covariant=True)


class TextCache(Generic[V]):
    """The memo of ``fn`` (see the module docstring): :attr:`lookup` is ``fn`` memoised.

    Args:
        fn: a pure function of one text.
        max_entries: texts kept at most (> 0).
        max_chars: characters of the kept texts at most (≥ ``max_text_chars``).
        max_text_chars: longer texts are not kept.
    """

    def __init__(
        self,
        fn: Callable[[str], V],
        *,
        max_entries: int,
        max_chars: int = MAX_CACHE_CHARS,
        max_text_chars: int = MAX_CACHED_TEXT_CHARS,
    ) -> None:
        if max_entries <= 0 or max_text_chars < 0 or max_chars < max_text_chars:
            raise ValueError("need max_entries > 0 and 0 <= max_text_chars <= max_chars")
        self.fn = fn
        self.max_entries = max_entries
        self.max_chars = max_chars
        self.max_text_chars = max_text_chars
        self._data: OrderedDict[str, V] = OrderedDict()
        self._lock = threading.Lock()
        data, lock, missing = self._data, self._lock, _MISSING
        get, move, keep, evict = data.get, data.move_to_end, data.setdefault, data.popitem
        chars = 0

        # One closure with everything in locals (a method with try/except KeyError cost ~1 µs more a miss).
        def lookup(text: str) -> V:
            nonlocal chars
            value = get(text, missing)
            if value is not missing:
                try:  # noqa: SIM105 (contextlib.suppress costs a context manager on every hit)
                    move(text)
                except KeyError:  # evicted by another thread since the get
                    pass
                return value  # type: ignore[no-any-return]
            value = fn(text)
            n = len(text)
            if n <= max_text_chars:
                lock.acquire()
                try:
                    if keep(text, value) is value:  # not kept by another thread meanwhile
                        chars += n
                        while len(data) > max_entries or chars > max_chars:
                            chars -= len(evict(last=False)[0])
                finally:
                    lock.release()
            return value

        def kept_chars() -> int:
            return chars

        def clear() -> None:
            nonlocal chars
            with lock:
                data.clear()
                chars = 0

        self.lookup: Callable[[str], V] = lookup
        self._kept_chars = kept_chars
        self._clear = clear

    def __contains__(self, text: object) -> bool:
        return text in self._data

    def __len__(self) -> int:
        return len(self._data)

    @property
    def chars(self) -> int:
        """Characters of the texts kept now."""
        return self._kept_chars()

    def cache_clear(self) -> None:
        """Forget every kept text."""
        self._clear()


class CachedFn(Protocol[V_co]):
    """What :func:`text_cache` makes of a function: call it like the function; ``cache`` is its
    :class:`TextCache`, ``__wrapped__`` the function itself."""

    @property
    def __wrapped__(self) -> Callable[[str], V_co]: ...

    @property
    def cache(self) -> TextCache[Any]: ...

    def __call__(self, text: str) -> V_co: ...

    def cache_clear(self) -> None: ...


def text_cache(
    *, max_entries: int, max_chars: int = MAX_CACHE_CHARS, max_text_chars: int = MAX_CACHED_TEXT_CHARS
) -> Callable[[Callable[[str], V]], CachedFn[V]]:
    """Decorator: memoise a function of one text in a :class:`TextCache` (``@text_cache(max_entries=4096)``)."""

    def wrap(fn: Callable[[str], V]) -> CachedFn[V]:
        cache = TextCache(fn, max_entries=max_entries, max_chars=max_chars, max_text_chars=max_text_chars)
        f = functools.update_wrapper(cache.lookup, fn)
        setattr(f, "cache", cache)  # noqa: B010 (a function attribute)
        setattr(f, "cache_clear", cache.cache_clear)  # noqa: B010
        return cast(CachedFn[V], f)

    return wrap
