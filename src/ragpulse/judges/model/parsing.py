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

from json_repair import repair_json

from ragpulse.errors import JudgeError

__all__ = [
    "extract_json",
    "find_json_object",
    "normalize_verdict_word",
    "parse_score",
    "parse_verdict",
    "split_reasoning",
    "strip_reasoning",
    "to_score",
]

_THINK_RE = re.compile(r"<(think|thinking|reasoning)>(.*?)</\1>", re.DOTALL | re.IGNORECASE)
_OPEN_RE = re.compile(r"<(?:think|thinking|reasoning)>", re.IGNORECASE)
_CLOSE_RE = re.compile(r"</(?:think|thinking|reasoning)>", re.IGNORECASE)
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
#: A score given with its scale: ``2/3``, ``4 / 5``, ``2 out of 3``, ``2 of 3``, ``2分（满分3分）``.
_FRACTION = r"[-+]?\d+(?:\.\d+)?\s*(?:/|／|out\s+of|of)\s*\d+(?:\.\d+)?"
_FRACTION_RE = re.compile(
    r"(?P<value>[-+]?\d+(?:\.\d+)?)\s*(?:/|／|out\s+of|of)\s*(?P<max>\d+(?:\.\d+)?)(?![\d.]*\s*[-–—]\s*\d)",
    re.IGNORECASE,
)
#: A stated scale: ``on a 0–3 scale``, ``1-5 scale``, ``scale of 0 to 3``, ``0到3分``, ``满分3分`` (lo 0).
_SCALE_RE = re.compile(
    r"(?P<lo>\d+)\s*(?:-|–|—|to|~|～|至|到)\s*(?P<hi>\d+)(?:\s*-?\s*point)?\s*(?:scale|分制|分)"
    r"|scale\s+(?:of|from)\s+(?P<lo2>\d+)\s*(?:-|–|—|to)\s*(?P<hi2>\d+)"
    r"|满分\s*(?P<hi3>\d+)",
    re.IGNORECASE,
)
_SCORE_LINE_RE = re.compile(
    r"^\s*[*_#>\-\s]*(?:score|rating|评分|分数|得分)[*_\s]*[:：]\s*[*_\s]*"
    rf"(?P<value>{_FRACTION}|[-+]?[\w.]+)",
    re.IGNORECASE | re.MULTILINE,
)
_NUMBER_RE = re.compile(rf"^\s*[*_]*(?P<value>{_FRACTION}|\d+(?:\.\d+)?)[*_]*\s*$", re.IGNORECASE)
_FIRST_NUMBER_RE = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?![\w.]*\d)")
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


def split_reasoning(text: str) -> tuple[str, str]:
    """Split a reply into ``(reasoning, answer)``: the verdict is read from ``answer`` only.

    Reasoning is every ``<think>…</think>`` block (also ``<thinking>``, ``<reasoning>``); everything before a
    closing tag whose opening tag is missing (servers that put the opening tag in the prompt, e.g. DeepSeek-R1
    and Qwen3 chat templates, send ``reasoning…</think>answer``); and everything after an opening tag that is
    never closed (the model ran out of room). Reasoning parts are joined by ``\n``, stripped.
    """
    parts: list[str] = []

    def keep(m: re.Match[str]) -> str:
        parts.append(m.group(2).strip())
        return ""

    out = _THINK_RE.sub(keep, text)
    closing = list(_CLOSE_RE.finditer(out))
    if closing:
        parts.insert(0, _OPEN_RE.sub("", out[: closing[-1].start()]).strip())
        out = out[closing[-1].end() :]
    m = _OPEN_RE.search(out)
    if m is not None:
        parts.append(out[m.end() :].strip())
        out = out[: m.start()]
    return "\n".join(p for p in parts if p), out


def strip_reasoning(text: str) -> str:
    """The answer of a reply without its reasoning (:func:`split_reasoning`)."""
    return split_reasoning(text)[1]


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


#: Object starts tried by the lenient pass per text, and characters of the text repaired from each start.
_MAX_REPAIRS = 16
_REPAIR_CHARS = 8192


def _repaired_objects(text: str) -> Iterable[tuple[dict[str, Any], str]]:
    """Yield ``(object, source_text)`` for every ``{`` of ``text`` where strict JSON fails but ``json-repair``
    finds a non-empty object (Python literals, raw newlines or unescaped quotes in strings, trailing commas,
    single quotes, a missing closing brace …); ``source_text`` runs from the ``{`` to the end of the text."""
    starts = [m.start() for m in re.finditer(r"\{", text)][:_MAX_REPAIRS]
    decoder = json.JSONDecoder()
    for i in starts:
        try:
            decoder.raw_decode(text, i)
            continue  # strict JSON here: the strict pass had it
        except ValueError:
            pass
        segment = text[i : i + _REPAIR_CHARS]
        try:
            found = repair_json(segment, return_objects=True, skip_json_loads=True)
        except (ValueError, RecursionError):
            continue
        for obj in found if isinstance(found, list) else [found]:
            if isinstance(obj, dict) and obj:
                yield obj, segment


def _quoted_objects(untrusted: Sequence[str]) -> list[dict[str, Any]]:
    """Every JSON object in the judged texts, strict or as ``json-repair`` reads it (the lenient pass skips a
    repaired reply object equal to one of them: a judged text cannot vote for itself in broken JSON). Only
    computed when the lenient pass has a candidate."""
    out: list[dict[str, Any]] = []
    for u in untrusted:
        if u and "{" in u:
            out.extend(obj for obj, _ in _objects_in(u))
            out.extend(obj for obj, _ in _repaired_objects(u))
    return out


def find_json_object(
    text: str, *, required: Sequence[str] = (), untrusted: Sequence[str] = ()
) -> dict[str, Any] | None:
    """Return the judge's JSON object in ``text``, or ``None``.

    Strict JSON first (fenced blocks, then the text); when no strict object qualifies, a lenient pass through
    the ``json-repair`` library (:func:`_repaired_objects`). The injection defence stands in front of both: an
    object whose source text appears in an ``untrusted`` text is skipped, and so is a repaired object equal to
    an object found (strictly or repaired) in one.

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
    quoted: list[dict[str, Any]] | None = None
    for obj, src in _repaired_objects(text):
        if required and not any(k in obj for k in required):
            continue
        if _is_untrusted(_squash(src)[:200], untrusted):
            continue
        if quoted is None:
            quoted = _quoted_objects(untrusted)
        if obj in quoted:
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
        stated = _FRACTION_RE.fullmatch(s)
        if stated is not None:
            return _on_scale(float(stated.group("value")), 0.0, float(stated.group("max")), scale_max, value)
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


def _on_scale(value: float, lo: float, hi: float, scale_max: float, raw: Any) -> float:
    """``value`` stated on ``[lo, hi]`` carried to ``[0, scale_max]``.

    Raises:
        JudgeError: ``out_of_range``: the value is outside its stated scale, or the scale is empty.
    """
    if not (math.isfinite(value) and hi > lo and lo <= value <= hi):
        raise JudgeError("out_of_range", f"score {raw!r} is outside its stated scale [{lo:g}, {hi:g}]")
    return (value - lo) * scale_max / (hi - lo)


def _stated_scale(body: str) -> tuple[float, float, str] | None:
    """``(lo, hi, body without the scale statement)`` when the reply states its scale, else ``None``."""
    m = _SCALE_RE.search(body)
    if m is None:
        return None
    lo = m.group("lo") or m.group("lo2") or "0"
    hi = m.group("hi") or m.group("hi2") or m.group("hi3")
    return float(lo), float(hi), body[: m.start()] + " " + body[m.end() :]


def parse_score(text: str, *, scale_max: float, untrusted: Sequence[str] = ()) -> tuple[float, str]:
    """Parse a numeric score on ``[0, scale_max]`` and the reason given with it.

    A score given with its scale is carried to ``[0, scale_max]``: ``"4/5"``, ``2 out of 3`` (value / max),
    ``on a 1–5 scale … 4`` ((value − lo) / (hi − lo)); the numbers of the scale are never read as the score.

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
    stated = _stated_scale(body)
    scan = stated[2] if stated is not None else body
    m = _SCORE_LINE_RE.search(scan)
    if m is not None:
        rest = scan[m.end() :].strip(" \n.*:：-")
        value = m.group("value")
        if stated is not None and _FRACTION_RE.fullmatch(value) is None:
            return _on_scale(_number(value), stated[0], stated[1], scale_max, value), rest
        return to_score(value, scale_max=scale_max), rest
    fraction = _FRACTION_RE.search(scan)
    if fraction is not None:
        return to_score(fraction.group(0), scale_max=scale_max), scan[fraction.end() :].strip(" \n.,;:*")
    if stated is not None:
        number = _FIRST_NUMBER_RE.search(scan)
        if number is None:
            raise JudgeError("unparseable", f"no score in: {_excerpt(body)}")
        value = number.group(0)
        return _on_scale(float(value), stated[0], stated[1], scale_max, value), scan[number.end() :].strip(
            " \n.,;:*"
        )
    first = _DECOR_RE.sub(" ", body).split()
    if first:
        try:
            return to_score(first[0].rstrip(".,;:"), scale_max=scale_max), " ".join(first[1:])
        except JudgeError as e:
            if e.code == "out_of_range":
                raise
    raise JudgeError("unparseable", f"no score in: {_excerpt(body)}")


def _number(value: str) -> float:
    """The number a score token starts with (``2``, ``2.5``, ``2分``)."""
    m = re.match(r"[-+]?\d+(?:\.\d+)?(?=分|[*_.]*$)", value.strip())
    if m is None:
        raise JudgeError("unparseable", f"score is not a number: {_excerpt(value)}")
    return float(m.group(0))


def _excerpt(text: str, n: int = 120) -> str:
    s = _squash(text)
    return s if len(s) <= n else s[: n - 1] + "…"
