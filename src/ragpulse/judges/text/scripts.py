"""Scripts the heuristic judges cannot read: they return ``skipped``/``unsupported_language`` instead of a
confident wrong score.

The heuristic judges segment Chinese with jieba and other text at Unicode word boundaries. That fails for
scripts written without spaces between words or with particles glued to words: Japanese kana are glued into
one token with the kanji around them, Thai, Lao, Khmer, Myanmar and Tibetan run whole phrases together, and
Korean Hangul words carry particles, so a faithful answer shares few "words" with its context. A text is
unreadable when at least :data:`MIN_CHARS` of its letters, and at least :data:`MIN_SHARE` of them, belong
to those scripts. LLM judges read every language.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["MIN_CHARS", "MIN_SHARE", "unreadable_script"]

#: Script name → character class of the scripts the heuristic judges do not segment.
_SCRIPTS: dict[str, str] = {
    "Japanese kana": "\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f",
    "Korean Hangul": "\u1100-\u11ff\u3130-\u318f\uac00-\ud7af",
    "Thai": "\u0e00-\u0e7f",
    "Lao": "\u0e80-\u0eff",
    "Khmer": "\u1780-\u17ff",
    "Myanmar": "\u1000-\u109f",
    "Tibetan": "\u0f00-\u0fff",
}
_RES = {name: re.compile(f"[{chars}]") for name, chars in _SCRIPTS.items()}
#: Any character of those scripts: texts without one (most) skip the per-script counts.
_ANY = re.compile(f"[{''.join(_SCRIPTS.values())}]")
#: A text needs at least this many letters of such scripts ...
MIN_CHARS = 3
#: ... making up at least this share of its letters.
MIN_SHARE = 0.1


def unreadable_script(texts: Iterable[str | None]) -> str | None:
    """The name of the first script of :data:`_SCRIPTS` that makes one of ``texts`` unreadable, else ``None``."""
    for text in texts:
        if not text or text.isascii() or _ANY.search(text) is None:
            continue
        letters = sum(1 for ch in text if ch.isalpha())
        for name, rx in _RES.items():
            n = len(rx.findall(text))
            if n >= MIN_CHARS and n >= MIN_SHARE * letters:
                return name
    return None
