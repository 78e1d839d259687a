"""Text helpers shared by judges: language detection, tokenisation (jieba for Chinese), abstention detection.

Tokenisation: runs of CJK characters are segmented with jieba (``jieba.lcut``, accurate mode); other text is
split on Unicode word boundaries and case-folded. Stop words (a short English list and common Chinese
function words) and punctuation are removed by :func:`content_tokens`.
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache
from itertools import filterfalse

from ragpulse.judges.text.cache import text_cache

__all__ = ["content_tokens", "detect_language", "is_abstention", "noun_characters", "tokens"]

_CJK_RE = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
# A non-CJK word character: words of other scripts stop at a CJK ideograph, so "12人" gives "12" + "人".
_WORD_CH = r"(?:(?![\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff])[^\W_])"
_SEGMENT_RE = re.compile(
    rf"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+|{_WORD_CH}+(?:[.'’-]{_WORD_CH}+)*", re.UNICODE
)

EN_STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are aren't as at be because been before being
    below between both but by can can't cannot could couldn't did didn't do does doesn't doing don't
    down during each few for from further had hadn't has hasn't have haven't having he he'd he'll he's
    her here here's hers herself him himself his how how's i i'd i'll i'm i've if in into is isn't it
    it's its itself let's me more most mustn't my myself no nor not of off on once only or other ought
    our ours ourselves out over own same shan't she she'd she'll she's should shouldn't so some such
    than that that's the their theirs them themselves then there there's these they they'd they'll
    they're they've this those through to too under until up very was wasn't we we'd we'll we're we've
    were weren't what what's when when's where where's which while who who's whom why why's will with
    won't would wouldn't you you'd you'll you're you've your yours yourself yourselves also may might
    must shall s t
    """.split()
)
ZH_STOPWORDS = frozenset(
    """
    的 了 和 是 在 就 都 而 及 与 着 或 一个 没有 我们 你们 他们 她们 它们 这 那 这个 那个 之 以 于 也 又 但 还 被 把 让 给 对 从 向 为 为了 由 等 等等 吗 呢 吧
    啊 呀 哦 嗯 么 该 其 此 并 即 则 若 如 如果 因为 所以 可以 可 能 会 要 将 已 已经 很 更 最 上 下 中 里 个 些 每 各 所 有 无 不 没 请 您 你 我 他 她 它
    自己
    """.split()
)

# Phrases that mark an answer that declines to answer. Matched on the case-folded, whitespace-collapsed
# answer; only short answers (or answers that start with the phrase) count, so "I don't know why X, but
# the policy says Y" style answers with substance are not treated as abstentions.
_ABSTAIN_EN = tuple(
    (
        "i don't know|i do not know|i dont know|i'm not sure|i am not sure|i cannot answer|"
        "i can't answer|i am unable to answer|i'm unable to answer|i could not find|i couldn't find|"
        "no information|not enough information|insufficient information|the context does not|"
        "the provided context does not|there is no information|cannot be determined|"
        "i have no information|unable to find|no relevant information|i don't have enough information|"
        "i do not have enough|sorry, i can't|sorry, i cannot"
    ).split("|")
)
_ABSTAIN_ZH = tuple(
    (
        "无法回答|不知道|无法确定|没有相关信息|没有找到相关|未找到相关|资料中没有|现有资料无法|无法从|不清楚|信息不足|没有足够的信息|抱歉，我无法|抱歉,我无法|暂无相关|无法提供|"
        "文档中没有|上下文中没有|未提及"
    ).split("|")
)

_STOPWORDS = EN_STOPWORDS | ZH_STOPWORDS

_jieba_lock = threading.Lock()


def detect_language(text: str | None) -> str:
    """Return ``zh`` when at least 20 % of the letters are CJK ideographs (or there are ≥ 10 of them), else ``en``."""
    if not text:
        return "en"
    cjk = len(_CJK_RE.findall(text))
    letters = sum(1 for ch in text if ch.isalpha())
    return "zh" if cjk and (cjk >= 10 or cjk / max(letters, 1) >= 0.2) else "en"


@lru_cache(maxsize=1)
def _jieba() -> object:
    import jieba

    jieba.setLogLevel(60)
    with _jieba_lock:
        jieba.initialize()
    return jieba


def _segment_cjk(run: str) -> list[str]:
    jb = _jieba()
    return [w for w in jb.lcut(run) if w.strip()]  # type: ignore[attr-defined]


#: :data:`_SEGMENT_RE` for ASCII text already lower-cased: no CJK runs, and a word character is a letter or digit.
_ASCII_SEGMENT_RE = re.compile(r"[a-z0-9]+(?:[.'-][a-z0-9]+)*")


def _tokenize(text: str) -> tuple[str, ...]:
    """Tokens of ``text`` (:func:`tokens`), not cached."""
    if text.isascii():  # most English text: one lower() and one findall (casefold is lower() on ASCII)
        return tuple(_ASCII_SEGMENT_RE.findall(text.lower()))
    return _segment(text)


def _segment(text: str) -> tuple[str, ...]:
    """Tokens of any text: jieba words for CJK runs, other words case-folded."""
    out: list[str] = []
    for m in _SEGMENT_RE.finditer(text):
        piece = m.group(0)
        if _CJK_RE.match(piece):
            out.extend(_segment_cjk(piece))
        else:
            out.append(piece.casefold())
    return tuple(out)


@text_cache(max_entries=4096)
def _token_lists(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(tokens, content tokens)`` of ``text``: one cache entry (one lookup, one miss) for both, since the
    judges ask for both of the same texts."""
    toks = _tokenize(text)
    return toks, tuple(filterfalse(_STOPWORDS.__contains__, toks))  # the loop runs in C


@lru_cache(maxsize=1)
def _character_tags() -> dict[str, str]:
    """Single CJK character → its part-of-speech tag in jieba's dictionary (``jieba.get_dict_file()``, lines
    "word frequency tag"; ~11,000 characters, read once, ~0.1 s). The tags ``jieba.posseg`` gives a dictionary
    word, without loading the tagger's tables (~50 MB)."""
    jb = _jieba()
    out: dict[str, str] = {}
    with jb.get_dict_file() as f:  # type: ignore[attr-defined]
        for raw in f:
            if raw[3:4] != b" ":  # a character of the Basic Multilingual Plane is 3 bytes of UTF-8
                continue
            parts = raw.decode("utf-8", "replace").split()
            if len(parts) == 3 and len(parts[0]) == 1 and _CJK_RE.match(parts[0]):
                out[parts[0]] = parts[2]
    return out


def noun_characters(text: str | None) -> frozenset[str]:
    """The CJK characters of ``text`` that jieba's dictionary tags as nouns (ICTCLAS tags ``n…``): 假 in
    "怎么申请育儿假？", 版 in "高级版多少钱？"; not 丢 (``zg``) in "工牌丢了怎么办？" nor 坏 (``a``) in "电脑坏了"."""
    if not text or text.isascii():
        return frozenset()
    tags = _character_tags()
    return frozenset(ch for ch in _CJK_RE.findall(text) if tags.get(ch, "").startswith("n"))


def tokens(text: str | None) -> list[str]:
    """All word tokens of ``text``: jieba words for Chinese runs, case-folded words otherwise (no punctuation).

    Cached by text with :func:`content_tokens` (see there)."""
    if not text:
        return []
    return list(_token_lists(text)[0])


def content_tokens(text: str | None) -> list[str]:
    """:func:`tokens` without English and Chinese stop words.

    Cached by text (LRU of 4,096 texts and 1,000,000 characters; texts over 100,000 characters are not cached:
    :mod:`ragpulse.judges.text.cache`): the judges of one trace ask for the same question/answer/sentence
    tokens several times.
    """
    if not text:
        return []
    return list(_token_lists(text)[1])


def is_abstention(answer: str | None) -> bool:
    """True when the answer declines to answer (``I don't know``, ``根据现有资料无法回答``, …).

    Heuristic: one of a list of English/Chinese refusal phrases appears in an answer of at most 200
    characters, or in the first sentence of a longer one. Cached by answer (LRU of 4,096 answers and 1,000,000
    characters; answers over 100,000 characters are not cached): every judge of a trace asks
    (:func:`ragpulse.judges.frame.precheck`).
    """
    return _is_abstention_cached(answer) if answer else False


@text_cache(max_entries=4096)
def _is_abstention_cached(answer: str) -> bool:
    norm = " ".join(answer.casefold().replace("’", "'").split())
    if not norm:
        return False
    head = norm if len(norm) <= 200 else re.split(r"[.!?。！？\n]", norm, maxsplit=1)[0]
    return any(p in head for p in _ABSTAIN_EN) or any(p in head for p in _ABSTAIN_ZH)
