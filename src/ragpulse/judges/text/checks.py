"""Sentence checks of the offline faithfulness judge beyond word lookup: chat talk, hedges, and edits of a
context sentence (negation, substituted names and numbers, swapped names).

- :func:`is_chat_talk`: a sentence that names nothing (no name, number or code identifier) and is a question,
  a short exclamation or about the speaker ("I find that fascinating.", "Have you ever been there?") makes
  no claim about the world that a context could support. Knowledge-grounded dialogue (Wizard of Wikipedia,
  Dinan et al., 2019; FaithDial, Dziri et al., 2022) mixes such turns with facts; they are left out of the
  mean like courtesy sentences.
- :func:`strip_hedge`: the words of a leading or trailing hedge ("If I remember right, …", "…, if I recall")
  are the speaker's, not a claim: the claim is the rest.
- :func:`context_edit`: a sentence that copies a context sentence almost word for word but edits it —
  adds or drops a negation, puts another name or number where the context sentence has one, or exchanges two
  names around the same words — says something else than the context. This is the token-level edit view of
  the perturbation types of summary fact-checking benchmarks (FactCC, Kryściński et al., 2020: negation,
  entity, number and pronoun swaps). The alignment is :class:`difflib.SequenceMatcher` on word tokens.

All checks are deterministic and read English and Chinese (:func:`context_edit` aligns Chinese by characters;
the swap rule is for English, Chinese swaps are :func:`ragpulse.judges.text.lexical.swapped_slot`'s).
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher

from ragpulse.judges.text.cache import text_cache
from ragpulse.judges.text.forms import form_key
from ragpulse.judges.text.lexical import has_cjk
from ragpulse.judges.text.tokens import content_tokens, tokens

__all__ = ["ContextEdit", "context_edit", "is_chat_talk", "is_negation", "strip_hedge"]

#: The speaker in the first person singular: a sentence about "I" that names nothing is talk ("I find that
#: fascinating."). "You", "your" and "we" are left out: an assistant's claims are often addressed to the user
#: ("Your order was delivered yesterday.", "款项会转账给您").
_PERSONAL = frozenset("i i'm i'd i've i'll me my mine myself 我".split())
#: Negation cues (closed word class). English ``-n't`` forms are matched by their ending.
_NEGATION = frozenset(
    "not no never none nothing nobody neither nor without cannot 不 没 没有 未 并未 从未 无 无法 非 不是 不能 不会 别 从不 并非".split()
)
# A hedge at the start ("I think", "If I remember right,", "As far as I know,", "I'm pretty sure", "I believe
# that") or at the end (", if I recall", ", I think") of a sentence.
_HEDGE_HEAD = re.compile(
    r"^(?:(?:oh|well|hmm|so|and|but|yes|yeah|sure),?\s+)*"
    r"(?:i (?:think|believe|guess|suppose|recall|reckon|heard|read)(?: that)?"
    r"|i'm (?:pretty |fairly |quite |not (?:100% |entirely |totally )?)?(?:sure|certain)(?:,? but)?(?: that)?"
    r"|if i (?:remember|recall)(?: (?:right|rightly|correctly))?"
    r"|as far as i (?:know|remember|can tell)"
    r"|to (?:my|the best of my) knowledge"
    r"|我(?:觉得|认为|记得|相信|猜)|如果我没记错(?:的话)?|据我所知)[,，]?\s*",
    re.IGNORECASE,
)
_HEDGE_TAIL = re.compile(
    r"[,，]\s*(?:if i (?:remember|recall)(?: (?:right|correctly))?|i (?:think|believe)|as far as i know)"
    r"(?=\s*[.!?。！？]?\s*$)",
    re.IGNORECASE,
)
# Words as written: inner dots and commas only before a digit ("3.5", "108,249") or a lower-case letter
# ("df.write.csv"), so "1987.Hot" (a missing space between sentences) is two words.
_RAW_WORD_RE = re.compile(
    r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+|[^\W_]+(?:(?:[.,](?=\d)|\.(?=[a-z])|['’-])[^\W_]+)*"
)
# Sentence ends inside a context, also where a space is missing after the full stop ("in 1987.Hot Rod is").
# (not at semicolons: a context sentence keeps its parenthesis "(born 1887; died 1958)" whole)
_CTX_SPLIT_RE = re.compile(r"(?<=[.!?])\s+|(?<=[a-z0-9)\]])\.(?=[A-Z])|(?<=[。！？])|\n+")
_DIGIT_RE = re.compile(r"\d")
_CAMEL_RE = re.compile(r"[a-z][A-Z]")
#: Words that join the items of a list: names reordered around them are not swapped.
_COORDINATION = frozenset("and or & with plus 和 与 及 以及 、 跟 同".split())
#: A context sentence is the source of an answer sentence when it holds this share of the answer sentence's
#: words (as stems).
MIN_ALIGNED_SHARE = 0.7


def strip_hedge(sentence: str) -> str:
    """``sentence`` without a leading or trailing hedge of the speaker (see the module docstring)."""
    out = _HEDGE_HEAD.sub("", sentence, count=1)
    return _HEDGE_TAIL.sub("", out, count=1)


def _names_anything(sentence: str) -> bool:
    """True when the sentence holds a number, a code identifier or a capitalised word inside it (a name)."""
    if _DIGIT_RE.search(sentence):
        return True
    words = list(_RAW_WORD_RE.finditer(sentence))
    for k, m in enumerate(words):
        w = m.group(0)
        if "." in w or _CAMEL_RE.search(w):
            return True
        if k > 0 and w[0].isupper() and w not in ("I", "I'm", "I'd", "I've", "I'll"):
            before = sentence[: m.start()].rstrip()
            if before and before[-1] not in '.!?"“':
                return True
    return False


def is_chat_talk(sentence: str) -> bool:
    """True for a sentence that names nothing and is a question, a short exclamation, or about the speaker in
    the first person singular ("Have you ever looked into it?", "Interesting choice!", "I'd love to learn more
    about it.").

    "Did you know that …?" carries a claim and is not talk. A sentence with Chinese text is talk only when it is
    a question or about 我 and names nothing (no digits)."""
    s = sentence.strip()
    if not s or _names_anything(s):
        return False
    body = strip_hedge(s)
    low = body.casefold()
    if low.startswith(("did you know", "do you know that", "你知道吗")):
        return False
    words = tokens(body)
    if s.endswith(("?", "？")):
        return True
    if any(w in _PERSONAL for w in words):
        return True
    # an exclamation without a verb of being ("Interesting choice!", "Oh, I love that!")
    return s.endswith(("!", "！")) and len(content_tokens(body)) <= 3 and not has_cjk(s)


def is_negation(token: str) -> bool:
    """True for a negation word ("not", "no", "never", "-n't", 不, 没有, 未 …)."""
    return token in _NEGATION or token.endswith("n't")


class ContextEdit:
    """Kinds of :func:`context_edit` findings (returned as strings)."""

    NEGATION = "negation"
    SUBSTITUTION = "substitution"
    SWAP = "swap"


@text_cache(max_entries=1024)
def _raw_sentences(chunk: str) -> tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]:
    """Per sentence of ``chunk``: its word keys (:func:`~ragpulse.judges.text.forms.form_key` of the case-folded
    words, so "opened" meets "open") and the same words as written (for names)."""
    out = []
    for s in _CTX_SPLIT_RE.split(chunk):
        raw = tuple(_raw_words(s))
        if not raw:
            continue
        out.append((tuple(form_key(w.casefold()) for w in raw), raw))
    return tuple(out)


def _raw_words(text: str) -> list[str]:
    """Word tokens keeping their case; Chinese runs as single characters (an edit of a copied Chinese sentence
    shows as well on characters, and segmenting every context sentence again with jieba would double the
    judge's time on Chinese text)."""
    out: list[str] = []
    for m in _RAW_WORD_RE.finditer(text):
        w = m.group(0)
        if has_cjk(w):
            out.extend(w)
        else:
            out.append(w.rstrip(".,"))
    return out


def _entity(raw: str, position: int) -> str | None:
    """``num`` for a token with a digit, ``name`` for a capitalised word not at position 0, else ``None``."""
    if _DIGIT_RE.search(raw):
        return "num"
    if position > 0 and raw[:1].isupper() and not raw.isupper():
        return "name"
    return None


def _capitalised(word: str) -> bool:
    return word[:1].isupper() and not word.isupper()


def _swapped(keys: list[str], raw_s: list[str], ctx_keys: tuple[str, ...], raw: tuple[str, ...]) -> bool:
    """Two names or numbers of the sentence stand in the context sentence in the other order with the same
    words between them ("from Bergen to Oslo" for "from Oslo to Bergen"); a list reordered around "and" is
    not a swap."""
    first: dict[str, int] = {}
    for j, k in enumerate(ctx_keys):
        first.setdefault(k, j)

    def entity(i: int) -> bool:
        j = first.get(keys[i])
        if j is None:
            return False
        if _DIGIT_RE.search(raw_s[i]):
            return True
        return _capitalised(raw_s[i]) and _capitalised(raw[j]) and (i > 0 or j > 0)

    ents = [i for i in range(len(keys)) if entity(i)]
    for x, i1 in enumerate(ents):
        for i2 in ents[x + 1 :]:
            j1, j2 = first[keys[i1]], first[keys[i2]]
            if keys[i1] == keys[i2] or j2 >= j1:
                continue
            between_a = [keys[k] for k in range(i1 + 1, i2) if k not in ents]
            between_b = [
                ctx_keys[k] for k in range(j2 + 1, j1) if not (_capitalised(raw[k]) or raw[k].isdigit())
            ]
            if between_a and between_a == between_b and not set(between_a) <= _COORDINATION:
                return True
    return False


def context_edit(sentence: str, chunk: str) -> str | None:
    """How ``sentence`` edits the context sentence of ``chunk`` it copies, or ``None``.

    The context sentence is the one that holds the most of the sentence's word keys (Snowball stems,
    :mod:`ragpulse.judges.text.forms`), at least :data:`MIN_ALIGNED_SHARE` of them; the two are then aligned
    word by word (:class:`difflib.SequenceMatcher`). Findings, in this order:

    - ``negation``: the sentence adds a negation word ("not", "never", "n't", 不, 没有, 未 …) the context
      sentence does not have there, or leaves out one of the context sentence's while keeping the words around it;
    - ``swap``: two names or numbers in the other order around the same words ("from Bergen to Oslo" for "from
      Oslo to Bergen", "A acquired B" for "B acquired A");
    - ``substitution``: a name or number of the sentence stands where the context sentence has a different one,
      and the context sentence does not hold it anywhere.

    Deletions are not edits (a summary drops detail); a sentence that matches no context sentence closely
    (a paraphrase) is not checked.
    """
    raw_s = _raw_words(sentence)
    keys = [form_key(w.casefold()) for w in raw_s]
    if len(keys) < 3:
        return None
    best: tuple[int, tuple[str, ...], tuple[str, ...]] | None = None
    for ctx_keys, raw in _raw_sentences(chunk):
        present = set(ctx_keys)
        matched = sum(1 for k in keys if k in present)
        if matched >= MIN_ALIGNED_SHARE * len(keys) and (best is None or matched > best[0]):
            best = (matched, ctx_keys, raw)
    if best is None:
        return None
    _, ctx_keys, raw = best
    ops = SequenceMatcher(None, keys, ctx_keys, autojunk=False).get_opcodes()
    for tag, i1, i2, j1, j2 in ops:
        added = any(is_negation(w) for w in keys[i1:i2])
        dropped = any(is_negation(w) for w in ctx_keys[j1:j2])
        # opcodes turn the sentence into the context sentence: "delete" = words only the sentence has
        if tag in ("delete", "replace") and added and not dropped:
            return ContextEdit.NEGATION
        # the context's negation left out, while the words around it are kept (not a clause dropped)
        if tag in ("insert", "replace") and dropped and not added and j2 - j1 <= 2:
            return ContextEdit.NEGATION
    # (Chinese swaps are lexical.swapped_slot's: single characters between two numbers match by chance)
    if not has_cjk(sentence) and _swapped(keys, raw_s, ctx_keys, raw):
        return ContextEdit.SWAP
    replaced: list[tuple[list[str], list[str]]] = []
    for tag, i1, i2, j1, j2 in ops:
        if tag != "replace":
            continue
        a_kinds = {_entity(raw_s[i], i) for i in range(i1, i2)} - {None}
        b_kinds = {_entity(raw[j], j) for j in range(j1, j2)} - {None}
        # a name where the context has a name, a number where it has a number
        if a_kinds & b_kinds:
            a_ents = [keys[i] for i in range(i1, i2) if _entity(raw_s[i], i) in b_kinds]
            b_ents = [ctx_keys[j] for j in range(j1, j2) if _entity(raw[j], j) in a_kinds]
            replaced.append((a_ents, b_ents))
    for k, (a1, b1) in enumerate(replaced):
        for a2, b2 in replaced[k + 1 :]:
            if set(a1) & set(b2) and set(a2) & set(b1):
                return ContextEdit.SWAP
    context_words = set(ctx_keys)
    for a_ents, _ in replaced:
        if any(a not in context_words for a in a_ents):
            return ContextEdit.SUBSTITUTION
    return None
