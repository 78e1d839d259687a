"""Prompt templates, passage rendering and JSON reply extraction for the reference-metric judges.

Templates are package data ``ragpulse/judges/prompts/<name>.<lang>.txt`` (``lang`` is ``en`` or ``zh``) using
``$placeholder`` syntax (:class:`string.Template`, so JSON braces in the text need no escaping). A file of the
same name in ``settings.judge.prompts_dir`` overrides the packaged one. A template missing a required
placeholder is rejected at load with :class:`~ragpulse.errors.ConfigError`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

from ragpulse.errors import ConfigError, JudgeError

__all__ = ["PromptPair", "extract_json", "load_prompts", "render_passages"]

_FENCE_RE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)

#: Neutral system message sent with every template.
SYSTEM = "You are a careful, strict evaluator. Follow the instructions and reply with JSON only."


@dataclass(frozen=True)
class PromptPair:
    """The English and Chinese templates of one judge (``text`` of both is hashed into the judge version)."""

    en: Template
    zh: Template

    def pick(self, lang: str) -> Template:
        """The template for ``lang`` (``zh`` or anything else → ``en``)."""
        return self.zh if lang == "zh" else self.en

    @property
    def text(self) -> str:
        """Both templates' text, for versioning."""
        return self.en.template + "\n---\n" + self.zh.template


def _read(name: str, lang: str, override_dir: Path | None) -> str:
    fname = f"{name}.{lang}.txt"
    if override_dir is not None and (override_dir / fname).is_file():
        return (override_dir / fname).read_text(encoding="utf-8")
    try:
        return resources.files("ragpulse.judges").joinpath("prompts", fname).read_text(encoding="utf-8")
    except FileNotFoundError as e:
        raise ConfigError(f"prompt template {fname} not found") from e


def load_prompts(name: str, required: Sequence[str], override_dir: Path | None = None) -> PromptPair:
    """Load the ``en`` and ``zh`` templates of ``name``.

    Raises:
        ConfigError: a template is missing, malformed, or lacks one of the ``required`` placeholders.
    """
    out: dict[str, Template] = {}
    for lang in ("en", "zh"):
        t = Template(_read(name, lang, override_dir))
        if not t.is_valid():
            raise ConfigError(f"prompt template {name}.{lang}.txt has an invalid $ placeholder")
        have = set(t.get_identifiers())
        missing = [p for p in required if p not in have]
        if missing:
            raise ConfigError(
                f"prompt template {name}.{lang}.txt lacks placeholder(s) ${', $'.join(missing)}"
            )
        out[lang] = t
    return PromptPair(en=out["en"], zh=out["zh"])


def render_passages(chunks: Sequence[str], budget_chars: int) -> tuple[str, int, bool]:
    """Number the chunks ``[1] …``, keeping top-ranked ones first within ``budget_chars`` characters.

    The first chunk is always kept (cut to the budget if longer). Returns ``(text, kept, truncated)``:
    ``kept`` chunks were rendered, ``truncated`` is True when anything was cut.
    """
    parts: list[str] = []
    used = 0
    truncated = False
    for i, c in enumerate(chunks):
        body = c.strip()
        if used + len(body) > budget_chars:
            if i == 0:
                body = body[:budget_chars]
                truncated = True
            else:
                truncated = True
                break
        parts.append(f"[{i + 1}] {body}")
        used += len(body)
    return "\n\n".join(parts), len(parts), truncated


def extract_json(text: str) -> dict[str, Any]:
    """The first JSON object in a model reply (inside a Markdown fence or followed by text is fine).

    Raises:
        JudgeError: ``empty_output`` for a blank reply, ``unparseable`` when no JSON object is found.
    """
    if not text or not text.strip():
        raise JudgeError("empty_output", "the judge model returned nothing")
    candidates = [m.group(1) for m in _FENCE_RE.finditer(text)] + [text]
    dec = json.JSONDecoder()
    for cand in candidates:
        start = cand.find("{")
        while start != -1:
            try:
                obj, _ = dec.raw_decode(cand, start)
            except json.JSONDecodeError:
                start = cand.find("{", start + 1)
                continue
            if isinstance(obj, dict):
                return obj
            start = cand.find("{", start + 1)
    raise JudgeError("unparseable", f"no JSON object in the judge reply: {text[:120]!r}")


def as_bool(value: Any) -> bool | None:
    """A verdict value as bool: ``true``/``false``, 1/0, ``"yes"``/``"no"``, ``"是"``/``"否"``; else ``None``."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        v = value.strip().strip(".").casefold()
        if v in {"true", "yes", "y", "1", "是", "有用", "相关", "pass", "passed"}:
            return True
        if v in {"false", "no", "n", "0", "否", "无用", "不相关", "fail", "failed"}:
            return False
    return None
