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
  entity, number and pronoun swaps). The alignment is :class:`difflib.SequenceMatcher` on word tokens. It also
  finds a name or number of the context sentence replaced by a common word the chunk does not hold ("filed by
  email" for "filed in Workday").
- :func:`polarity_conflict`: a sentence in its own words that negates what a context sentence about the same
  thing states ("…, but it is not paid" for "paid parental leave"), or (English) states what the context only
  negates. :func:`proposition_polarity`: whether the context states or negates a yes/no question's words.

All checks are deterministic and read English and Chinese (:func:`context_edit` aligns Chinese by characters;
the swap rule is for English, Chinese swaps are :func:`ragpulse.judges.text.lexical.swapped_slot`'s).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from difflib import SequenceMatcher
from typing import NamedTuple

from ragpulse.judges.text.cache import text_cache
from ragpulse.judges.text.forms import form_key
from ragpulse.judges.text.lexical import has_cjk
from ragpulse.judges.text.tokens import EN_STOPWORDS, ZH_STOPWORDS, content_tokens, tokens

__all__ = [
    "ASKING_WORDS",
    "ContextEdit",
    "PolarityConflict",
    "context_edit",
    "is_chat_talk",
    "is_negation",
    "polarity_conflict",
    "proposition_polarity",
    "strip_hedge",
]

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


def _negates(words: Sequence[str], i: int) -> bool:
    """``words[i]`` is a negation word that negates ("no later than", "not only" do not)."""
    return is_negation(words[i]) and not (i + 1 < len(words) and words[i + 1] in _NOT_NEGATED)


class ContextEdit:
    """Kinds of :func:`context_edit` findings (returned as strings)."""

    NEGATION = "negation"
    SUBSTITUTION = "substitution"
    SWAP = "swap"
    REPLACED_NAME = "replaced_name"


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
        added = any(_negates(keys, i) for i in range(i1, i2))
        dropped = any(_negates(ctx_keys, j) for j in range(j1, j2))
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
    if _replaced_name(ops, keys, raw_s, ctx_keys, raw, chunk):
        return ContextEdit.REPLACED_NAME
    return None


#: Words that stand for a number or an amount without naming it ("eight" for "8", "several weeks"): a sentence
#: that puts one where the context has a number rounds or spells it, it does not invent a fact.
_QUANTITY_WORDS = frozenset(
    "zero one two three four five six seven eight nine ten eleven twelve twenty thirty hundred thousand million "
    "several many multiple numerous various certain half dozen couple".split()
)


#: Words on either side of a replacement :func:`_replaced_name` looks at ("by email" for "in Workday"): a longer
#: one is a rewording, not one fact changed.
_MAX_REPLACED = 3


def _span(words: Sequence[str]) -> int:
    """Length of aligned words in words, a Chinese character counting half (two make a word)."""
    cjk = sum(1 for w in words if has_cjk(w))
    return len(words) - cjk + (cjk + 1) // 2


@text_cache(max_entries=1024)
def _chunk_keys(chunk: str) -> frozenset[str]:
    """Every word key of ``chunk`` (:func:`_raw_sentences`; Chinese by characters)."""
    return frozenset(k for ctx_keys, _ in _raw_sentences(chunk) for k in ctx_keys)


def _invented(raw: str, key: str, chunk_words: frozenset[str], gone: Sequence[str]) -> bool:
    """``raw`` (key ``key``) is a content word the chunk does not hold, no number or quantity word, and no
    abbreviation or acronym of the replaced words ``gone`` ("Jan" for "January", "DLT" for "Delta Live
    Tables")."""
    low = raw.casefold()
    if key in chunk_words or low in EN_STOPWORDS or low in ZH_STOPWORDS or low in _QUANTITY_WORDS:
        return False
    if _DIGIT_RE.search(raw) or (len(low) < 3 and not has_cjk(low)):
        return False
    if raw.isupper() and low == "".join(g[0] for g in gone if g[:1].isupper()).casefold():
        return False  # an acronym of the replaced words ("DLT" for "Delta Live Tables")
    return not any(g.casefold().startswith(low) or low.startswith(g.casefold()) for g in gone)


def _replaced_name(
    ops: Sequence[tuple[str, int, int, int, int]],
    keys: list[str],
    raw_s: list[str],
    ctx_keys: tuple[str, ...],
    raw: tuple[str, ...],
    chunk: str,
) -> bool:
    """A name or number of the context sentence is replaced, in the aligned sentence, by a common word the
    chunk does not hold anywhere ("filed by email" for "filed in Workday", "通过邮件" for "通过 Ledgerly 报销
    系统"): the sentence states another fact in the name's place. A name left out (a deletion, "filed in the
    system") or kept elsewhere in the sentence is not one."""
    # a copy: the words the alignment keeps in order are most of the sentence (not words found here and there)
    if sum(i2 - i1 for tag, i1, i2, _, _ in ops if tag == "equal") < MIN_ALIGNED_SHARE * len(keys):
        return False
    sentence_keys = set(keys)
    chunk_words = _chunk_keys(chunk)
    for tag, i1, i2, j1, j2 in ops:
        if tag != "replace" or _span(raw_s[i1:i2]) > _MAX_REPLACED or _span(raw[j1:j2]) > _MAX_REPLACED:
            continue
        gone = [
            raw[j]
            for j in range(j1, j2)
            if _entity(raw[j], j)
            and ctx_keys[j] not in sentence_keys
            and raw[j].casefold() not in EN_STOPWORDS
        ]
        if not gone or not any(_invented(raw_s[i], keys[i], chunk_words, raw[j1:j2]) for i in range(i1, i2)):
            continue
        # the deciding difference: every other content word of the sentence is in the chunk
        if all(
            i1 <= i < i2 or keys[i] in chunk_words or not _is_content(w) or _DIGIT_RE.search(w)
            for i, w in enumerate(raw_s)
        ):
            return True
    return False


# -- polarity ------------------------------------------------------------------------------------------------
#: Phrases with a negation word that negate nothing ("not only", "no later than", "no matter how").
_NOT_NEGATING_RE = re.compile(
    r"\b(?:not (?:only|just|merely|to mention)|no (?:matter|doubt)|nothing but"
    r"|(?:no|not) (?:later|earlier|more|less|fewer|sooner|greater|higher|lower|longer) than)\b",
    re.IGNORECASE,
)
#: Words a negation may be followed by without negating the next content word ("not only", "no later than").
_NOT_NEGATED = frozenset(
    "only onli just merely mere later earlier more less fewer sooner greater matter doubt".split()
)
#: Chinese characters that negate the word they open or precede (不带薪, 没有, 未提交, 无法, 非营利).
_ZH_NEG_CHARS = frozenset("不没未无非别否")
#: Chinese words that open with a negation character without negating (不仅 "not only", 非常 "very", 未来
#: "future", 无论 "whatever", 不同 "different").
_ZH_NOT_NEGATING = frozenset(
    "不仅 不但 不过 不断 不久 不管 不少 不同 不得不 不幸 不错 不禁 不料 不妨 不时 无论 无数 无疑 非常 未来 没收 否则 "
    "非洲".split()
)
#: Chinese question words (the "A-not-A" form and question particles): they ask, they do not negate (是否,
#: 有没有, 能不能, 吗).
ASKING_WORDS = frozenset("是否 是不是 有没有 能否 能不能 会不会 可否 可不可以 对不对 吗 么 呢".split())
#: English words that start with "un"/"non" without being a negation of the rest.
_UN_WORDS = frozenset(
    "under understand understood unless until unto union unique unit units unite united unity universal "
    "universe university uniform unison unanimous none nonetheless nonsense".split()
)
#: How many words after a negation word (English) it reaches in the context: "are not eligible for paid leave".
_NEG_REACH = 4
_CLAUSE_RE = re.compile(r"[,;:，；：、]|\bbut\b|\bhowever\b|但是?|然而|不过", re.IGNORECASE)
_ZH_CLAUSE_BREAKS = frozenset("，,；;：:、")
#: How many characters before a Chinese context word a negation reaches within its clause ("没有她的消息").
_ZH_NEG_REACH = 6
_ZH_CLAUSE_SPLIT_RE = re.compile(r"[，,；;：:、]")


def _is_cue(word: str) -> bool:
    """A negation word: :func:`is_negation`, or a Chinese word of one or two characters opening with a
    negation character (不, 不可, 没有, 未能), not one of :data:`_ZH_NOT_NEGATING`."""
    if is_negation(word):
        return True
    return 0 < len(word) <= 2 and word[0] in _ZH_NEG_CHARS and word not in _ZH_NOT_NEGATING


def _is_content(word: str) -> bool:
    low = word.casefold()
    return not (low in EN_STOPWORDS or low in ZH_STOPWORDS or _is_cue(low) or low in ASKING_WORDS)


def _negated_root(word: str, folded_chunk: str) -> str | None:
    """For an English word that negates its own stem ("unpaid", "non-refundable"): the key of the stem, else
    ``None``; for a Chinese word that opens with a negation character and holds a word
    of two or more characters after it (不带薪 → 带薪): that word when the chunk holds it."""
    low = word.casefold()
    if has_cjk(low):
        if (
            len(low) >= 3
            and low[0] in _ZH_NEG_CHARS
            and low not in _ZH_NOT_NEGATING
            and low[1:] in folded_chunk
        ):
            return low[1:]
        return None
    if low in _UN_WORDS:
        return None
    for prefix in ("non-", "non", "un"):
        rest = low[len(prefix) :]
        if low.startswith(prefix) and len(rest) >= 4 and rest.isalpha():
            return form_key(rest)
    return None


#: Words that limit a negation to a time, condition or exception ("Refunds are not issued after 14 days" for
#: "Refunds are issued within 14 days"): the limited negation follows from the context, it does not deny it.
_QUALIFIERS = frozenset(
    "after before until unless except outside beyond once without if when while during later earlier than "
    "之后 以后 之前 以前 除非 除了 超过 以外 如果 期间".split()
)


def _qualified(rest: Sequence[str]) -> bool:
    """The words after a negated word (in its clause) limit the negation (:data:`_QUALIFIERS`)."""
    return any(w.casefold() in _QUALIFIERS for w in rest)


class _Negated:
    """A word a sentence negates: its key (Snowball stem; a Chinese word as it is), its text, and the content
    keys before the negation in the same clause (the sentence's earlier ones when the clause has none: "…, but
    it is not paid")."""

    __slots__ = ("before", "key", "word")

    def __init__(self, key: str, word: str, before: list[str]) -> None:
        self.key, self.word, self.before = key, word, before


def _sentence_negations(
    sentence: str, folded_chunk: str, written: dict[str, str]
) -> tuple[list[_Negated], list[str], bool]:
    """The words ``sentence`` negates, its content keys, and whether it holds any negation at all; ``written``
    is filled with each content key's word as the sentence writes it."""
    text = _NOT_NEGATING_RE.sub(" ", sentence)
    out: list[_Negated] = []
    content: list[str] = []
    any_cue = False
    written.clear()
    for clause in _CLAUSE_RE.split(text):
        words = list(tokens(clause)) if has_cjk(clause) else _raw_words(clause)
        keys = [form_key(w.casefold()) for w in words]
        start = len(content)
        for k, w in enumerate(words):
            low = w.casefold()
            root = _negated_root(w, folded_chunk)
            if root is not None:
                any_cue = True
                if not _qualified(words[k + 1 :]):
                    out.append(_Negated(root, w, content[start:] or content[:]))
            elif _is_cue(low):
                any_cue = True
                nxt = words[k + 1 : k + 4]
                if nxt and nxt[0].casefold() in _NOT_NEGATED:
                    continue
                for m, after in enumerate(nxt, k + 1):
                    if _is_content(after):
                        if (not has_cjk(after) or len(after) >= 2) and not _qualified(words[m + 1 :]):
                            out.append(_Negated(keys[m], after, content[start:] or content[:]))
                        break
            elif _is_content(w):
                content.append(keys[k])
                written.setdefault(keys[k], w)
    return out, content, any_cue


@text_cache(max_entries=1024)
def _polar_sentences(chunk: str) -> tuple[tuple[frozenset[str], frozenset[str], frozenset[str], str], ...]:
    """Per sentence of an English ``chunk``: its content keys, the keys it may negate (within
    :data:`_NEG_REACH` words after a negation word, or the stem of an "un"/"non" word), the keys it negates
    for sure (the first content word after a negation word, or such a stem), and the sentence case-folded."""
    out = []
    for ctx_keys, raw in _raw_sentences(chunk):
        reach: set[str] = set()
        sure: set[str] = set()
        lows = [w.casefold() for w in raw]
        for k, low in enumerate(lows):
            root = _negated_root(raw[k], "")
            if root is not None:
                reach.add(root)
                sure.add(root)
            elif is_negation(low):
                reach.update(ctx_keys[k + 1 : k + 1 + _NEG_REACH])
                nxt = lows[k + 1 : k + 4]
                if nxt and nxt[0] in _NOT_NEGATED:
                    continue
                for m, after in enumerate(raw[k + 1 : k + 4], k + 1):
                    if _is_content(after):
                        sure.add(ctx_keys[m])
                        break
        content = frozenset(ctx_keys[k] for k, w in enumerate(raw) if _is_content(w))
        out.append((content, frozenset(reach), frozenset(sure), " ".join(lows)))
    return tuple(out)


@text_cache(max_entries=1024)
def _zh_sentences(chunk: str) -> tuple[str, ...]:
    """The sentences of ``chunk``, case-folded (for looking up Chinese words)."""
    return tuple(s for s in (p.strip().casefold() for p in _CTX_SPLIT_RE.split(chunk)) if s)


def _zh_idiom(text: str, i: int) -> bool:
    """A word of :data:`_ZH_NOT_NEGATING` (不断, 非常 …) starts at ``text[i]``."""
    return any(text.startswith(w, i) for w in _ZH_NOT_NEGATING)


def _zh_negated_at(sentence: str, word: str) -> tuple[bool, bool]:
    """Whether ``word`` occurs in the Chinese ``sentence`` negated (a negation character within the
    :data:`_ZH_NEG_REACH` characters before it, in the same clause, not opening 不断, 非常 …) and whether it occurs without one."""
    neg = pos = False
    p = sentence.find(word)
    while p >= 0:
        before = ""
        for ch in reversed(sentence[max(0, p - _ZH_NEG_REACH) : p]):
            if ch in _ZH_CLAUSE_BREAKS:
                break
            before = ch + before
        if any(
            ch in _ZH_NEG_CHARS and not _zh_idiom(sentence, p - len(before) + k)
            for k, ch in enumerate(before)
        ):
            neg = True
        else:
            pos = True
        p = sentence.find(word, p + 1)
    return neg, pos


def _holds(sentence_keys: frozenset[str], folded: str, key: str) -> bool:
    return key in sentence_keys or (has_cjk(key) and key in folded)


def _same_subject(before: list[str], sentence_keys: frozenset[str], folded: str) -> bool:
    """At least half (and one) of the words ``before`` a negation stand in the context sentence: it speaks of
    the same thing ("parental leave is not paid" and "… paid parental leave"; not "contractors are not
    paid" and "employees are paid")."""
    found = sum(1 for k in before if _holds(sentence_keys, folded, k))
    return found >= 1 and 2 * found >= len(before)


class PolarityConflict(NamedTuple):
    """A :func:`polarity_conflict`: the word (as the sentence writes it), and
    whether the sentence negates it (``True``) or states what the context negates (``False``)."""

    word: str
    negated: bool


def polarity_conflict(sentence: str, chunk: str) -> PolarityConflict | None:
    """A word whose polarity ``sentence`` turns against ``chunk``, or ``None``; for paraphrases too, where
    :func:`context_edit` needs a copied sentence.

    - The sentence negates a word ("not", "no", "never", "-n't", "without", an "un"/"non" stem, 不/没/未/无/非 …;
      the negated word is the first content word after the negation) that a context sentence about the same
      thing (:func:`_same_subject`: half the sentence's words before the negation are in it) states without a
      negation, and that no sentence of the chunk negates: "Employees get 16 weeks of parental leave, but it is
      not paid." and "You get 16 weeks, but it is unpaid." against "Employees get 16 weeks of paid parental
      leave." Not "Leave is not transferable." when the context says so.
    - (English) The sentence holds no negation and states a word that the chunk only ever negates (as the first content
      word after a negation, or as an "un"/"non" stem), in a context sentence whose words before the negation
      are half in the sentence: "Leave can be transferred." against "Leave is not transferable."

    "Not only", "no later than", "no more than" negate nothing.
    """
    written: dict[str, str] = {}
    negated, content, any_cue = _sentence_negations(sentence, chunk.casefold(), written)
    if has_cjk(sentence) or has_cjk(chunk):
        return _zh_conflict(negated, chunk)
    polar = _polar_sentences(chunk)
    for n in negated:
        if any(n.key in reach for _, reach, _, _ in polar):
            continue  # the context negates it too (or may: within reach of a negation)
        if any(n.key in keys and _same_subject(n.before, keys, folded) for keys, _, _, folded in polar):
            return PolarityConflict(n.word, True)
    if any_cue:
        return None
    stated = set(content)
    for key in stated:
        if any(key in keys and key not in sure for keys, _, sure, _ in polar):
            continue  # the context states it somewhere without a negation
        for keys, _, sure, folded in polar:
            if key in sure:
                before = _context_before(folded, keys, key)
                if before and _same_subject(before, frozenset(stated), " ".join(content)):
                    return PolarityConflict(written.get(key, key), False)
    return None


def _context_before(folded: str, keys: frozenset[str], key: str) -> list[str]:
    """The content keys of a context sentence (case-folded text ``folded``) before its negation of ``key``."""
    words = folded.split()
    out: list[str] = []
    for w in words:
        if is_negation(w) or _negated_root(w, "") == key:
            return out
        if _is_content(w):
            out.append(form_key(w))
    return out


def _zh_conflict(negated: list[_Negated], chunk: str) -> PolarityConflict | None:
    """:func:`polarity_conflict` for a sentence or chunk with Chinese text: the context's words are found by
    substring, negated when a negation character stands within the :data:`_ZH_NEG_REACH` characters before them
    (:func:`_zh_negated_at`); the words before the sentence's negation (two or more characters: a single
    character matches anywhere) must stand in the context's clause of the word. Only the sentence's
    negations are checked: the characters before a context word are too weak a sign of its negation to fail
    a sentence that states it."""
    sentences = _zh_sentences(chunk)
    for n in negated:
        if not has_cjk(n.key):
            continue
        if any(_zh_negated_at(s, n.key)[0] for s in sentences):
            continue
        before = [k for k in n.before if len(k) >= 2]
        if not before:
            continue
        for s in sentences:
            for clause in _ZH_CLAUSE_SPLIT_RE.split(s):
                if _zh_negated_at(clause, n.key)[1] and _same_subject(before, frozenset(), clause):
                    return PolarityConflict(n.word, True)
    return None


def proposition_polarity(words: list[str], chunk: str) -> bool | None:
    """Whether ``chunk`` states the proposition made of ``words`` (the content words of a yes/no question,
    without its question words): ``True`` when a context sentence holds every word and negates none,
    ``False`` when one holds every word and negates one of them, ``None`` when no sentence holds them all or
    sentences disagree (the judge is not sure)."""
    if not words:
        return None
    found: set[bool] = set()
    if has_cjk(chunk) or any(has_cjk(w) for w in words):
        for s in _zh_sentences(chunk):
            if all(w in s for w in words):
                marks = [_zh_negated_at(s, w) for w in words]
                found.add(not any(neg for neg, _ in marks))
    else:
        keys = [form_key(w) for w in words]
        for content, reach, sure, _ in _polar_sentences(chunk):
            if all(k in content or k in sure for k in keys):
                if any(k in sure for k in keys):
                    found.add(False)
                elif any(k in reach for k in keys):
                    found.update((True, False))  # within reach of a negation: not sure
                else:
                    found.add(True)
    return found.pop() if len(found) == 1 else None
