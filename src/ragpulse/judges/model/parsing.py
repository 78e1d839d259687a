"""Robust parsing of judge-model output into verdicts.

Judge models answer in many shapes; these functions accept the common ones and turn everything else into a
:class:`~ragpulse.errors.JudgeError` with a machine code, never into a silent 0:

- ``empty_output``: nothing but whitespace (or Markdown decoration) came back.
- ``unparseable``: no verdict could be found.
- ``out_of_range``: a score outside its scale, or not finite (NaN, inf).

Yes/no verdicts (:func:`parse_verdict`; 1.0 for yes, 0.0 for no, or a graded score), in this order:

1. a JSON object (see below) with a ``verdict``/``label``/``answer``/``relevant``/``supported`` key, or with
   a clean numeric ``score``/``rating`` in [0, 1] (``{"score": 0.8}``, ``{"score": "0.8"}``: a graded score);
2. a refusal or an admission of uncertainty in the first line ("I cannot determine", "I'm sorry",
   "对不起", "无法判断", "不确定", "需要更多信息") → ``unparseable``, never a verdict;
3. a labelled line such as ``label: no``, ``Verdict: **YES**``, ``The answer is: NO.``, ``结论：否``,
   ``答案是：否`` (the label wins over any yes/no word in an explanation line);
4. the first word of the output, Markdown emphasis and quotes removed: ``YES``, ``Yes.``, ``yes\\n``,
   ``**YES**``, ``YES, because …``, ``是``/``否`` (also ``是的``, ``不是``, ``不``), ``true``/``false``;
   a closing line holding only a verdict word; a reply that is only a number in [0, 1].

Verdict words must stand alone in every language: a word followed by another letter is not a verdict, so
"相关性较低…" is not 相关 (relevant), "是否回应了问题…" is not 是 (yes) and "不确定" is not 不 (no); a CJK verdict
word must be followed by punctuation, white space or the end of the line.

JSON objects (:func:`find_json_object`): objects inside a Markdown code fence are tried first, then every
top-level ``{…}`` in the text in order (so JSON followed by prose works). An object whose text also appears
in one of the ``untrusted`` inputs (the judged answer, question or context) is ignored: a verdict-shaped
string quoted from the answer, e.g. ``{"score": 1}``, is never taken for the judge's own verdict.

Scores (:func:`parse_score`) come from a JSON ``score``/``rating`` member (a number or a numeric string such
as ``"0.8"``) or a ``score: 2`` / ``评分：2`` line.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

from ragpulse.errors import JudgeError

__all__ = [
    "extract_json",
    "find_json_object",
    "normalize_verdict_word",
    "parse_score",
    "parse_verdict",
    "strip_reasoning",
    "to_score",
]

_THINK_RE = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.DOTALL | re.IGNORECASE)
_FENCE_RE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n?(.*?)```", re.DOTALL)
_DECOR_RE = re.compile(r"[*_`#>\"'“”‘’「」『』\[\]()（）【】]+")
_LABEL_KEYS = ("verdict", "label", "answer", "judgement", "judgment", "decision", "result", "relevant")
_LABEL_KEYS_ZH = ("结论", "判断", "判定", "答案", "标签", "结果")
_LABEL_LINE_RE = re.compile(
    r"^\s*[*_#>\-\s]*(?:(?:the|my|final)\s+)*(?P<key>"
    + "|".join(_LABEL_KEYS + _LABEL_KEYS_ZH)
    + r")(?:[*_\s]*(?:\s+is|是|为)?[*_\s]*[:：]|\s+is\s)\s*(?P<value>.+)$",
    re.IGNORECASE | re.MULTILINE,
)
_REFUSAL_RE = re.compile(
    r"\b(?:can ?not|can't|unable to|not able to|impossible to)\s+(?:determine|judge|decide|tell|say|assess|"
    r"evaluate|answer)|\b(?:i'm|i am) (?:sorry|not sure|uncertain)|\bnot enough information|\binsufficient "
    r"information|\bundetermined\b|\buncertain\b"
    r"|对不起|抱歉|无法判断|无法确定|无法评估|难以判断|不确定|不清楚|需要更多信息|信息不足",
    re.IGNORECASE,
)
_NUMBER_RE = re.compile(r"^\s*[*_]*(?P<value>\d+(?:\.\d+)?)[*_]*\s*$")
_SCORE_LINE_RE = re.compile(
    r"^\s*[*_#>\-\s]*(?:score|rating|评分|分数|得分)[*_\s]*[:：]\s*[*_\s]*(?P<value>[-+]?[\w.]+)",
    re.IGNORECASE | re.MULTILINE,
)
_YES_WORDS = frozenset(
    {
        "yes",
        "y",
        "true",
        "pass",
        "passed",
        "supported",
        "relevant",
        "useful",
        "是",
        "是的",
        "对",
        "相关",
        "有用",
    }
)
_NO_WORDS = frozenset(
    "no n not false fail failed unsupported irrelevant useless 否 不是 不 不对 不相关 无用".split()
)
# Longest words first so "不相关" wins over "不" and "是的" over "是"; "no" words are tried before "yes" words. A word
# matches only when no letter follows it (``(?!\w)``: CJK ideographs are letters too).
_VERDICT_WORDS: tuple[tuple[re.Pattern[str], bool], ...] = tuple(
    (re.compile(rf"{re.escape(w)}(?!\w)"), verdict)
    for words, verdict in ((_NO_WORDS, False), (_YES_WORDS, True))
    for w in sorted(words, key=len, reverse=True)
)


def strip_reasoning(text: str) -> str:
    """Remove ``<think>…</think>`` (also ``<thinking>``, ``<reasoning>``) blocks that reasoning models put
    before their answer; an unclosed opening block swallows the rest (the model ran out of room)."""
    out = _THINK_RE.sub("", text)
    m = re.search(r"<(think|thinking|reasoning)>", out, re.IGNORECASE)
    return out[: m.start()] if m else out


def _squash(text: str) -> str:
    return " ".join(text.split())


def _is_untrusted(snippet: str, untrusted: Sequence[str]) -> bool:
    s = _squash(snippet)
    return bool(s) and any(s in _squash(u) for u in untrusted if u)


def _objects_in(text: str) -> Iterable[tuple[dict[str, Any], str]]:
    """Yield ``(object, source_text)`` for every top-level JSON object in ``text``, left to right."""
    decoder = json.JSONDecoder()
    i = text.find("{")
    while i != -1:
        try:
            obj, end = decoder.raw_decode(text, i)
        except ValueError:
            i = text.find("{", i + 1)
            continue
        if isinstance(obj, dict):
            yield obj, text[i:end]
            i = text.find("{", end)
        else:
            i = text.find("{", i + 1)


def find_json_object(
    text: str, *, required: Sequence[str] = (), untrusted: Sequence[str] = ()
) -> dict[str, Any] | None:
    """Return the judge's JSON object in ``text``, or ``None``.

    Args:
        text: the model output.
        required: the object must have at least one of these keys (any object when empty).
        untrusted: judged texts; objects quoted from them are skipped.
    """
    candidates: list[tuple[dict[str, Any], str]] = []
    for block in _FENCE_RE.findall(text):
        candidates.extend(_objects_in(block))
    candidates.extend(_objects_in(text))
    for obj, src in candidates:
        if required and not any(k in obj for k in required):
            continue
        if _is_untrusted(src, untrusted):
            continue
        return obj
    return None


def extract_json(text: str, *, required: Sequence[str] = (), untrusted: Sequence[str] = ()) -> dict[str, Any]:
    """The judge's JSON object in ``text`` (see :func:`find_json_object`).

    Raises:
        JudgeError: ``empty_output`` for a blank reply, ``unparseable`` when there is no such object.
    """
    body = _check_not_empty(text)
    obj = find_json_object(body, required=required, untrusted=untrusted)
    if obj is None:
        raise JudgeError("unparseable", f"no JSON object in: {_excerpt(body)}")
    return obj


def normalize_verdict_word(value: Any) -> bool | None:
    """Map a verdict value to ``True`` (yes), ``False`` (no) or ``None`` (not a verdict).

    Accepts booleans, 0/1 numbers and words (``yes``, ``No.``, ``**YES**``, ``是``, ``否``, ``不是``, …).
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return True if value == 1 else False if value == 0 else None
    if not isinstance(value, str):
        return None
    s = _DECOR_RE.sub(" ", value).strip()
    if not s:
        return None
    low = s.casefold()
    for rx, verdict in _VERDICT_WORDS:
        if rx.match(low) is not None:
            return verdict
    return None


def _check_not_empty(text: str) -> str:
    stripped = _DECOR_RE.sub("", text or "").strip()
    if not stripped:
        raise JudgeError("empty_output", "the judge model returned no text")
    return text.strip()


def parse_verdict(text: str, *, untrusted: Sequence[str] = ()) -> float:
    """Parse a yes/no verdict, or a graded score in [0, 1] (see the module docstring for the accepted shapes).

    Returns:
        1.0 for yes, 0.0 for no, the score for a clean numeric score in [0, 1].

    Raises:
        JudgeError: ``empty_output``, ``unparseable`` (also refusals and uncertainty) or ``out_of_range`` (a
            numeric score outside [0, 1]).
    """
    body = _check_not_empty(text)
    obj = find_json_object(body, required=(*_LABEL_KEYS, "supported", "score", "rating"), untrusted=untrusted)
    if obj is not None:
        for k in (*_LABEL_KEYS, "supported"):
            if k in obj:
                v = normalize_verdict_word(obj[k])
                if v is not None:
                    return float(v)
        if "score" in obj or "rating" in obj:
            return to_score(obj.get("score", obj.get("rating")), scale_max=1.0)
    lines = [ln for ln in body.splitlines() if _DECOR_RE.sub("", ln).strip()]
    if _REFUSAL_RE.search(lines[0]) and normalize_verdict_word(lines[0]) is None:
        raise JudgeError("unparseable", f"the judge model did not decide: {_excerpt(body)}")
    for m in _LABEL_LINE_RE.finditer(body):
        if _is_untrusted(m.group(0), untrusted):
            continue
        v = normalize_verdict_word(m.group("value"))
        if v is not None:
            return float(v)
    # The verdict opens the reply (as the prompts ask) ...
    v = normalize_verdict_word(lines[0])
    if v is not None:
        return float(v)
    number = _NUMBER_RE.match(body) if len(lines) == 1 else None
    if number is not None:
        return to_score(number.group("value"), scale_max=1.0)
    # ... or, failing that, a closing line that holds only a verdict word (not one quoted from the inputs).
    last = lines[-1]
    if len(lines) > 1 and len(_DECOR_RE.sub(" ", last).split()) <= 2 and not _is_untrusted(last, untrusted):
        v = normalize_verdict_word(last)
        if v is not None:
            return float(v)
    raise JudgeError("unparseable", f"no yes/no verdict in: {_excerpt(body)}")


def to_score(value: Any, *, scale_max: float) -> float:
    """Turn a score value (number or numeric string) on ``[0, scale_max]`` into a float on that scale.

    Raises:
        JudgeError: ``unparseable`` (not a number) or ``out_of_range`` (outside the scale, NaN or infinite).
    """
    if isinstance(value, bool):
        raise JudgeError("unparseable", f"score is a boolean: {value!r}")
    if isinstance(value, str):
        s = value.strip().rstrip("*_").strip()
        try:
            num = float(s)
        except ValueError as e:
            raise JudgeError("unparseable", f"score is not a number: {_excerpt(value)}") from e
    elif isinstance(value, int | float):
        num = float(value)
    else:
        raise JudgeError("unparseable", f"score is not a number: {_excerpt(repr(value))}")
    if not math.isfinite(num) or not 0.0 <= num <= scale_max:
        raise JudgeError("out_of_range", f"score {value!r} is outside [0, {scale_max:g}]")
    return num


def parse_score(text: str, *, scale_max: float, untrusted: Sequence[str] = ()) -> tuple[float, str]:
    """Parse a numeric score on ``[0, scale_max]`` and the reason given with it.

    Returns:
        ``(score_on_the_scale, reason)``; ``reason`` is the JSON ``reason``/``explanation`` member or the text
        after the score line ("" when none).

    Raises:
        JudgeError: ``empty_output``, ``unparseable`` or ``out_of_range``.
    """
    body = _check_not_empty(text)
    obj = find_json_object(body, required=("score", "rating"), untrusted=untrusted)
    if obj is not None:
        raw = obj.get("score", obj.get("rating"))
        reason = obj.get("reason") or obj.get("explanation") or ""
        return to_score(raw, scale_max=scale_max), str(reason)
    m = _SCORE_LINE_RE.search(body)
    if m is not None:
        rest = body[m.end() :].strip(" \n.*:：-")
        return to_score(m.group("value"), scale_max=scale_max), rest
    first = _DECOR_RE.sub(" ", body).split()
    if first:
        try:
            return to_score(first[0].rstrip(".,;:"), scale_max=scale_max), " ".join(first[1:])
        except JudgeError as e:
            if e.code == "out_of_range":
                raise
    raise JudgeError("unparseable", f"no score in: {_excerpt(body)}")


def _excerpt(text: str, n: int = 120) -> str:
    s = _squash(text)
    return s if len(s) <= n else s[: n - 1] + "…"
