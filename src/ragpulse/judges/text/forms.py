"""Word forms for the offline judges: English words reduced to their Snowball (Porter2) stem, so that "lost"
and "loss", "apply" and "application", "reimbursed" and "reimbursement" meet; Chinese words compared by their
character bigrams, so that 报销款 meets 报销的费用.

The stemmer is ``snowballstemmer`` (the Snowball project's English stemmer, Porter, 2001; pure Python, the one
Sphinx uses). Two English stems match when they are equal, when one is a prefix of the other
(``appli``/``applic``, ``deliv``/``deliveri``), or when they share a prefix of at least three characters that is
all of the shorter stem but its last letter and differ in length by at most one (``loss``/``lost``; not
``park``/``parent``): Porter2 strips inflections, not every derivation.

Irregular forms share no stem ("paid"/"pay", "went"/"go", "lost"/"lose"): :func:`lemma_key` looks the word up in
the English dictionary of ``simplemma`` (Barbaresi, "Simplemma: a simple multilingual lemmatizer for Python",
2021; pure Python, its English data loaded on first use, ~20 MB) and stems the lemma.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from functools import lru_cache
from typing import TYPE_CHECKING

from ragpulse.judges.text.lexical import has_cjk

if TYPE_CHECKING:  # both are imported on first use: a replay with LLM judges only never loads them (~0.1 s)
    import snowballstemmer

__all__ = ["form_key", "forms_match", "lemma_key", "zh_found"]

_local = threading.local()


def _stemmer() -> snowballstemmer.stemmer:
    """One stemmer per thread (a Snowball stemmer object keeps state while it stems)."""
    st = getattr(_local, "stemmer", None)
    if st is None:
        import snowballstemmer

        st = _local.stemmer = snowballstemmer.stemmer("english")
    return st


@lru_cache(maxsize=65536)
def form_key(token: str) -> str:
    """The token's key for comparing word forms: its Snowball stem for a Latin-script word; Chinese words and
    words with digits are their own key."""
    if has_cjk(token) or not token.isalpha():
        return token
    return str(_stemmer().stemWord(token))


@lru_cache(maxsize=65536)
def lemma_key(token: str) -> str:
    """The stem of the token's dictionary lemma (``paid`` → ``pay``, ``went`` → ``go``) for a Latin-script word;
    other tokens are their own key. Irregular forms meet here where their stems (:func:`form_key`) differ."""
    if has_cjk(token) or not token.isalpha():
        return token
    import simplemma

    return str(_stemmer().stemWord(simplemma.lemmatize(token, lang="en")))


def forms_match(a: str, b: str) -> bool:
    """True when the keys ``a`` and ``b`` (:func:`form_key`) are forms of one word (see the module docstring)."""
    if a == b:
        return True
    if has_cjk(a) or has_cjk(b) or not a.isalpha() or not b.isalpha():
        return False
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    if len(short) < 4:
        return False
    common = 0
    for x, y in zip(short, long_, strict=False):
        if x != y:
            break
        common += 1
    if common == len(short):
        return True
    # the last letters differ (loss/lost): only as a suffix, the rest of equal length — not park/parent
    return common >= max(3, len(short) - 1) and len(long_) - len(short) <= 1


def zh_found(word: str, text: str, keys: Iterable[str] = ()) -> bool:
    """True when the Chinese ``word`` occurs in ``text`` (case-folded), is one of ``keys``, or — for words of
    three or more characters — one of its character bigrams occurs in ``text``."""
    if word in text or word in keys:
        return True
    return len(word) >= 3 and any(word[i : i + 2] in text for i in range(len(word) - 1))
