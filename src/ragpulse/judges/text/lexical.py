"""Lexical building blocks of the heuristic judges: sentences, meta statements, echoes, support, swaps.

Deterministic and model-free; tokens from :mod:`ragpulse.judges.text.tokens`. :func:`sentence_spans` splits on
``. ! ? ;`` + white space, ``。！？；`` and line breaks (not inside ``df.write.csv`` or ``3.5``);
:func:`is_meta_statement` spots sentences about the context ("the context does not mention …", "上下文中没有
提到…"); :func:`restates_question` an echo of the question; :func:`chunk_index` caches a chunk's tokens (LRU bounded in
entries and characters, :mod:`ragpulse.judges.text.cache`);
:func:`best_chunk_support` / :func:`best_chunk_bigram_support` measure support in the single best chunk, with
:func:`token_weight` (digits and code identifiers :data:`NUMBER_WEIGHT`, names :data:`NAME_WEIGHT`);
:func:`swapped_slot` finds an entity or number standing in another's slot of the context.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ragpulse.judges.text.cache import text_cache
from ragpulse.judges.text.tokens import content_tokens

__all__ = [
    "NAME_WEIGHT",
    "NUMBER_WEIGHT",
    "QUESTION_WORDS",
    "ChunkIndex",
    "best_chunk_bigram_support",
    "best_chunk_support",
    "char_bigrams",
    "chunk_index",
    "has_cjk",
    "is_courtesy",
    "is_meta_statement",
    "restates_question",
    "salient_terms",
    "sentence_spans",
    "sentences",
    "swapped_slot",
    "token_supported",
    "token_weight",
]

#: Weight of a token holding a digit (amounts, dates, versions) or of a code identifier: wrong numbers and
#: made-up API names are the commonest hallucinations.
NUMBER_WEIGHT = 2.0
#: Weight of a capitalised name (``Delhi``, ``MLflow``) that is not the first word of its sentence.
NAME_WEIGHT = 1.5
#: Share of the question's content tokens an answer must repeat, adding nothing, to count as an echo.
ECHO_MIN_COVERAGE = 0.8
#: Reason of a judgement whose answer only restates the question (:func:`restates_question`).
ECHO_REASON = "restates_question: the answer only repeats the question"

_SENT_SPLIT_RE = re.compile(r"(?<=[.!?;])\s+|(?<=[。！？；])|\n+")
_CJK_RE = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_DIGIT_RE = re.compile(r"\d")
_RUN_RE = re.compile(r"[^\W_]+")
_WORDISH_RE = re.compile(r"[^\W_]+(?:[.-][^\W_]+)*")
_CAMEL_RE = re.compile(r"[a-z][A-Z]")

_META_EN = re.compile(
    r"\b(?:"
    r"not (?:explicitly |directly |clearly |specifically )?(?:stated|mentioned|specified|provided|covered|"
    r"addressed|described|discussed)"
    r"|no (?:clear |direct |specific |explicit |relevant )?(?:information|answer|mention)"
    r"|(?:does|do) not (?:provide|mention|specify|contain|say|cover|address|include|explain|describe)"
    r"|doesn't (?:provide|mention|specify|contain|say|cover|address|include|explain|describe)"
    r"|(?:context|document|documentation|article|passage|text|page)(?: you provided| provided)? "
    r"(?:is about|seems|appears|explains|describes|provides|mentions|discusses|is not relevant)"
    r")",
    re.IGNORECASE,
)
_COURTESY_RE = re.compile(
    r"\b(?:sorry|apologi[sz]e|apologies|thank you|thanks|hope (?:this|that) helps|(?:glad|happy) to help|"
    r"rest assured|(?:great|good|interesting|excellent) question)\b|抱歉|对不起|感谢|谢谢|带来不便|请放心|希望对您有(?:所)?帮助|很高兴为您",
    re.IGNORECASE,
)

#: Interrogative words: they ask, they are not topic words an answer should repeat (English ones are
#: stop words already).
QUESTION_WORDS = frozenset(
    "怎样 怎么 怎么样 怎么办 会怎样 多大 如何 什么 什么样 时候 谁 哪 哪里 哪儿 哪些 哪个 多少 几 为什么 为何 是否 多久 能否 可否".split()
)

_META_ZH = re.compile(
    r"(?:上下文|资料|文档|文章|文中|材料|参考内容|给定内容)[^。！？；]{0,8}?"
    r"(?:没有|未|并未|并没有)(?:明确)?(?:提到|提及|说明|给出|包含|涉及)"
    r"|(?:没有|未)(?:明确)?(?:提到|提及|说明)"
)


def has_cjk(text: str) -> bool:
    """True when ``text`` holds at least one CJK ideograph. ``str.isascii`` reads a flag CPython keeps on
    every string, so English text costs no regex search."""
    return not text.isascii() and _CJK_RE.search(text) is not None


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of the sentences/clauses of ``text`` that hold at least one content token, in order:
    ``text[start:end]`` is the sentence without surrounding white space. Cached by text (LRU of 1,024 texts and
    1,000,000 characters; texts over 100,000 characters are not cached): the relevancy and faithfulness judges
    of one trace both split its answer."""
    return list(_sentence_spans_cached(text))


@text_cache(max_entries=1024)
def _sentence_spans_cached(text: str) -> tuple[tuple[int, int], ...]:
    out: list[tuple[int, int]] = []
    cuts = [(m.start(), m.end()) for m in _SENT_SPLIT_RE.finditer(text)]
    begin = 0
    for cut_start, cut_end in [*cuts, (len(text), len(text))]:
        part = text[begin:cut_start]
        stripped = part.strip()
        if stripped and content_tokens(stripped):
            start = begin + (len(part) - len(part.lstrip()))
            out.append((start, start + len(stripped)))
        begin = cut_end
    return tuple(out)


def sentences(text: str) -> list[str]:
    """Sentences/clauses of ``text`` that hold at least one content token, stripped, in order."""
    return [text[a:b] for a, b in sentence_spans(text)]


def is_meta_statement(sentence: str) -> bool:
    """True when the sentence talks about the context (lacks/mentions/is about) rather than stating facts."""
    if _META_EN.search(sentence):
        return True
    return not sentence.isascii() and _META_ZH.search(sentence) is not None


def is_courtesy(sentence: str) -> bool:
    """True for apologies, thanks and reassurances ("Sorry for the delay", "非常抱歉给您带来不便").

    They carry no claim worth checking against the context, so faithfulness leaves them out of its mean.
    """
    return _COURTESY_RE.search(sentence) is not None


def restates_question(question_tokens: Iterable[str], answer_tokens: Iterable[str]) -> bool:
    """True when the answer only repeats the question.

    Every answer content token is a question content token, and the answer repeats at least
    :data:`ECHO_MIN_COVERAGE` of the question's distinct content tokens. A short answer that picks one
    option named in the question ("Arthur's Magazine" for "A or B?") is not an echo.
    """
    q, a = set(question_tokens), set(answer_tokens)
    return bool(a) and bool(q) and a <= q and len(a) >= ECHO_MIN_COVERAGE * len(q)


def salient_terms(text: str) -> dict[str, float]:
    """Case-folded names and code identifiers of ``text`` with their weights.

    Names: words with a capital initial that are not the first word of a sentence (:data:`NAME_WEIGHT`).
    Identifiers: camelCase words and dotted names such as ``df.write.csv`` (:data:`NUMBER_WEIGHT`).
    One pass over the words of ``text``.
    """
    out: dict[str, float] = {}
    for m in _WORDISH_RE.finditer(text):
        word, i = m.group(0), m.start()
        if "." in word or (not word.islower() and _CAMEL_RE.search(word)):  # camelCase needs a capital
            out[word.casefold()] = NUMBER_WEIGHT
            continue
        if not word[0].isupper() or i == 0:
            continue
        if i >= 2 and text[i - 1].isspace() and text[i - 2] in ".!?":
            continue
        folded = word.casefold()
        if out.get(folded, 0.0) < NAME_WEIGHT:
            out[folded] = NAME_WEIGHT
    return out


def token_weight(token: str, salient: Mapping[str, float]) -> float:
    """Weight of ``token`` in support scores: digits → :data:`NUMBER_WEIGHT`, else its weight in
    ``salient`` (:func:`salient_terms`), else 1."""
    if not token.isalpha() and _DIGIT_RE.search(token):  # letters only: no digit (no regex)
        return NUMBER_WEIGHT
    return salient.get(token, 1.0)


@dataclass(frozen=True)
class ChunkIndex:
    """One context chunk prepared for lookups.

    Attributes:
        tokens: the chunk's distinct content tokens.
        folded: the chunk text, case-folded (for substring checks of Chinese words).
    """

    tokens: frozenset[str]
    folded: str


@text_cache(max_entries=1024)
def chunk_index(chunk: str) -> ChunkIndex:
    """Tokenise a context chunk once (cached by its text: LRU of 1,024 chunks and 1,000,000 characters; chunks
    over 100,000 characters are indexed every time, :mod:`ragpulse.judges.text.cache`)."""
    return ChunkIndex(tokens=frozenset(content_tokens(chunk)), folded=chunk.casefold())


def token_supported(token: str, chunk: ChunkIndex, *, min_cjk_chars: int = 2) -> bool:
    """True when ``token`` occurs in the chunk.

    A token is found when it is one of the chunk's tokens; a Chinese word of at least ``min_cjk_chars``
    characters (2 for the offline judges; 1 for the reference metrics of :mod:`ragpulse.judges.text.statements`) is
    also found as a substring of the chunk text, because jieba may segment the same words differently in the
    answer and in the context.
    """
    if token in chunk.tokens:
        return True
    return len(token) >= min_cjk_chars and has_cjk(token) and token in chunk.folded


def best_chunk_support(
    tokens: Sequence[str], chunks: Sequence[ChunkIndex], salient: Mapping[str, float]
) -> tuple[float, int]:
    """Weighted share (0–1) of ``tokens`` found in the single best chunk, and that chunk's index.

    Returns ``(1.0, -1)`` for no tokens (nothing to verify) and ``(0.0, -1)`` for no chunks.
    """
    distinct = list(dict.fromkeys(tokens))
    if not distinct:
        return 1.0, -1
    weights = [token_weight(t, salient) for t in distinct]
    total = sum(weights)
    # token_supported, with its per-token part (is it a Chinese word to look for as a substring?) done once
    substring = [len(t) >= 2 and has_cjk(t) for t in distinct]
    best, best_i = 0.0, -1
    for i, ch in enumerate(chunks):
        found, folded = ch.tokens, ch.folded
        got = sum(
            w
            for t, w, sub in zip(distinct, weights, substring, strict=True)
            if t in found or (sub and t in folded)
        )
        if got > best:
            best, best_i = got, i
            if got >= total:
                break
    return best / total, best_i


def char_bigrams(text: str) -> list[str]:
    """Distinct character bigrams of the case-folded letter/digit runs of ``text`` (punctuation breaks runs)."""
    out: dict[str, None] = {}
    for run in _RUN_RE.findall(text.casefold()):
        for i in range(len(run) - 1):
            out[run[i : i + 2]] = None
    return list(out)


def best_chunk_bigram_support(grams: Sequence[str], chunks: Sequence[ChunkIndex]) -> float:
    """Share (0–1) of ``grams`` found in the single best chunk's text; 1.0 for no grams, 0.0 for no chunks."""
    if not grams:
        return 1.0
    best = 0
    for ch in chunks:
        got = sum(1 for g in grams if g in ch.folded)
        if got > best:
            best = got
            if got == len(grams):
                break
    return best / len(grams)


#: A neighbour word is a slot only when the context uses it at most this often.
MAX_SLOT_USES = 2
#: ``a`` counts as next to ``w`` in the context within this many content words (a summary drops modifiers).
SLOT_WINDOW = 3
_NUMBER_WORDS = frozenset(
    "one two three four five six seven eight nine ten eleven twelve twice half 一 二 两 三 四 五 六 七 八 九 十".split()
)


_WORD_RUN_RE = re.compile(r"\w+")
_CAPITAL_RUN_RE = re.compile(r"\b[A-Z]\w*")


def _named_at(text: str, word: str, start: int) -> bool:
    """``word`` (found at ``start`` in ``text``) is capitalised inside a sentence: not all capitals (code such
    as GRANT), and the last character before it, spaces skipped, is a letter, a digit or a comma (not a
    sentence or line start)."""
    if not word[0].isupper() or word.isupper():
        return False
    k = start - 1
    while k >= 0 and text[k] == " ":
        k -= 1
    return k >= 0 and (text[k].isalnum() or text[k] == ",")


@text_cache(max_entries=4096)
def _names(text: str) -> frozenset[str] | None:
    """For an ASCII ``text``: the lower-cased words (``\\w+`` runs) that stand as names somewhere in it
    (:func:`_named_at`), so that :func:`_kind` needs no search per token; ``None`` for other texts. Cached
    (chunks come back for every sentence of an answer)."""
    if not text.isascii():
        return None
    # only runs that start with a capital can be names: in ASCII text those are the matches of \b[A-Z]\w*
    return frozenset(
        m.group(0).lower() for m in _CAPITAL_RUN_RE.finditer(text) if _named_at(text, m.group(0), m.start())
    )


def _names_joined(first: str, second: str) -> frozenset[str] | None:
    """:func:`_names` of ``first + "\\n" + second`` from the (cached) names of each: no ``\\w+`` run spans the
    line break, and a word right after it is at a line start in both readings."""
    a, b = _names(first), _names(second)
    return None if a is None or b is None else a | b


def _kind(token: str, text: str, names: frozenset[str] | None = None) -> str | None:
    """What a swap can exchange: ``num`` (digits, number words), ``name`` (capitalised inside a sentence of
    ``text``, not all capitals), ``zh``
    (a Chinese word of two or more characters); ``None`` for other words. ``names``: :func:`_names` of
    ``text`` when the caller has it (same answer, no search)."""
    if (not token.isalpha() and _DIGIT_RE.search(token)) or token in _NUMBER_WORDS:
        return "num"
    if has_cjk(token):
        return "zh" if len(token) >= 2 else None
    if names is not None and token.isascii() and _WORD_RUN_RE.fullmatch(token):
        # an ASCII word in an ASCII text: its case-insensitive whole-word occurrences are exactly the \w+
        # runs equal to it ignoring case
        return "name" if token.lower() in names else None
    for m in re.finditer(rf"(?<!\w){re.escape(token)}(?!\w)", text, re.IGNORECASE):
        if _named_at(text, m.group(0), m.start()):
            return "name"
    return None


@text_cache(max_entries=256)
def _slot_index(chunk: str) -> tuple[list[str], dict[str, list[int]], str]:
    """The chunk's content words, where each one stands among them, and the chunk case-folded — built once
    per chunk (cached as :func:`chunk_index`): every look-up of :func:`swapped_slot` is then by token, so its
    work is linear in the lengths of sentence and context (a 100,000-character Chinese answer without
    sentence punctuation is one sentence; an English one is hundreds, each checked against the same chunk)."""
    ctx = content_tokens(chunk)
    at: dict[str, list[int]] = {}
    for k, t in enumerate(ctx):
        at.setdefault(t, []).append(k)
    return ctx, at, chunk.casefold()


def swapped_slot(sentence: str, chunk: str) -> str | None:
    """An entity or number of ``sentence`` standing where ``chunk`` has another one, or ``None``.

    Lexical support finds every word of "Tom Varga was appointed chief risk officer" in a context saying
    "Harlow Bank appointed Mira Osei as chief risk officer. Her predecessor, Tom Varga, moved to Lisbon." This
    looks at the slots instead: for each name, number or Chinese word ``a`` of the sentence and each content
    word ``w`` right next to it, the context must not put ``w`` next to a *different* name/number/word of
    the same kind that the sentence does not mention (``Osei`` next to ``appointed``) while never putting
    ``a`` there. Returns the swapped token (for the reason), else ``None``.
    """
    # the sentence's words with the clause each stands in: words are neighbours only within one clause (v5),
    # as in the context (:func:`_near`): "16周带薪，提前8周在Workday申请。" joins two facts, and 带薪 does
    # not stand in 提前's slot
    words: list[str] = []
    clause_of: list[int] = []
    for n, part in enumerate(_ANSWER_CLAUSE_RE.split(sentence) if has_cjk(sentence) else [sentence]):
        part_words = content_tokens(part)
        words.extend(part_words)
        clause_of.extend([n] * len(part_words))
    ctx, at, folded_chunk = _slot_index(chunk)
    in_sentence = set(words)
    both = sentence + "\n" + chunk
    kinds: dict[tuple[str, str], str | None] = {}  # _kind per (token, text), each computed once
    names: dict[str, frozenset[str] | None] = {both: _names_joined(sentence, chunk)}
    in_chunk: dict[str, bool] = {}

    def kind_of(token: str, text: str) -> str | None:
        key = (token, text)
        if key not in kinds:
            if text not in names:
                names[text] = _names(text)  # sentence or chunk
            kinds[key] = _kind(token, text, names[text])
        return kinds[key]

    for i, a in enumerate(words):
        seen = in_chunk.get(a)
        if seen is None:
            seen = in_chunk[a] = a in at or a in folded_chunk
        if not seen:
            continue
        kind = kind_of(a, both)
        if kind is None:
            continue
        for side in (-1, 1):
            j = i + side
            if not 0 <= j < len(words) or words[j] == a or clause_of[j] != clause_of[i]:
                continue
            w = words[j]
            # a slot is a word the context uses rarely: common words of a long context have many neighbours
            w_at = at.get(w, ())
            if len(w_at) > MAX_SLOT_USES or _adjacent(a, w, side, ctx, folded_chunk, w_at):
                continue
            if not has_cjk(w) and kind_of(w, sentence) is not None:  # a slot is a relation word, not a name
                continue
            fillers = {ctx[k - side] for k in w_at if 0 <= k - side < len(ctx)}
            if any(
                b != a and b not in in_sentence and kind_of(b, chunk) == kind and a not in b and b not in a
                for b in fillers
            ):
                return a
    return None


def _adjacent(
    a: str, w: str, side: int, ctx: Sequence[str], folded: str, w_at: Sequence[int] | None = None
) -> bool:
    """``a`` next to ``w`` on ``side`` in the context: within :data:`SLOT_WINDOW` content words, or (Chinese)
    within 8 characters of the same sentence. ``w_at``: the positions of ``w`` in ``ctx`` (found when not
    given); the cost is proportional to their number, not to the context's length."""
    n = len(ctx)
    if w_at is None:
        w_at = [k for k, t in enumerate(ctx) if t == w]
    for j in w_at:  # w at j, a at j - side * d
        for d in range(1, SLOT_WINDOW + 1):
            k = j - side * d
            if 0 <= k < n and ctx[k] == a:
                return True
    if has_cjk(a) or has_cjk(w):
        return _near(a, w, side, folded)
    return False


#: Chinese: ``a`` counts as next to ``w`` within this many characters of one clause (no comma, colon or
#: sentence end between): a shortened answer drops a clause's middle ("30天内[通过 Ledgerly 报销系统]提交").
CLAUSE_GAP = 24
#: Clause breaks of a Chinese answer sentence: its words are neighbours only within one clause.
_ANSWER_CLAUSE_RE = re.compile(r"[，、：,;:]")
_SENTENCE_GAP = r"[^。！？；]{0,8}"  # within 8 characters, no sentence end
_CLAUSE_GAP = rf"[^。！？；，、：,;:.!?]{{0,{CLAUSE_GAP}}}"  # within CLAUSE_GAP characters of one clause


def _near(a: str, w: str, side: int, folded: str) -> bool:
    """``a`` then ``w`` (``side`` 1; ``w`` then ``a`` for -1) in ``folded``: within 8 characters and no
    sentence end (。！？；) between, or within :data:`CLAUSE_GAP` characters of one clause. Looked for
    around each occurrence of the slot word ``w`` only (rare by then: at most :data:`MAX_SLOT_USES` in the
    context's words). A word left out of the clause's middle is a shortening, not a swap: the swap of
    another word into ``a``'s place is still caught from ``a``'s other side, where the context's neighbour
    differs."""
    reach = max(8, CLAUSE_GAP)
    if side == 1:  # a … w: a ends shortly before w
        patterns = [re.compile(re.escape(a) + gap + r"\Z") for gap in (_SENTENCE_GAP, _CLAUSE_GAP)]
    else:  # w … a: a starts shortly after w
        patterns = [re.compile(gap + re.escape(a)) for gap in (_SENTENCE_GAP, _CLAUSE_GAP)]
    p = folded.find(w)
    while p >= 0:
        for pattern in patterns:
            if side == 1:
                found = pattern.search(folded, max(0, p - reach - len(a)), p) is not None
            else:
                end = p + len(w)
                found = pattern.match(folded, end, end + reach + len(a)) is not None
            if found:
                return True
        p = folded.find(w, p + 1)
    return False
