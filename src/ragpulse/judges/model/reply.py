"""The shapes of a chat-completions reply: the answer text, the reasoning beside it, the finish reason, usage.

Servers put the same things in different places (``docs/llm-judges.md``, "Tested judge models"):

- **answer text**: ``choices[0].message.content`` as a string, or as a list of content blocks (Mistral
  Magistral, other compatible servers): the ``text`` (and ``output_text``) blocks joined by newlines;
  ``thinking`` / ``reasoning`` blocks are reasoning, never the answer;
- **reasoning** beside the answer: ``message.reasoning_content`` (DeepSeek, vLLM, Qwen), ``message.reasoning``
  (OpenRouter, Ollama, newer vLLM), ``message.thinking``, or thinking blocks (their ``thinking``/``text``/
  ``summary`` given as a string or as text blocks). Reasoning inside the content (``<think>…</think>``) is split
  off by the one parser, :func:`ragpulse.judges.model.parsing.split_reasoning`;
- **usage**: ``prompt_tokens``, ``completion_tokens`` and ``completion_tokens_details.reasoning_tokens``.
  OpenAI counts the reasoning tokens inside ``completion_tokens``; some servers (xAI …) count them beside it
  (``total_tokens`` = prompt + completion + reasoning). :func:`read_completion` gives completion tokens that
  always include the reasoning: ``completion_tokens + reasoning_tokens`` when the reasoning is evidently not
  in it (``total_tokens`` ≥ prompt + completion + reasoning, or reasoning > completion), else
  ``completion_tokens``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ragpulse.errors import JudgeError

__all__ = ["CompletionParts", "Usage", "read_completion"]

#: Content block types that hold the answer text.
_TEXT_BLOCKS = frozenset({"text", "output_text"})
#: Content block types that hold reasoning.
_REASONING_BLOCKS = frozenset({"thinking", "reasoning", "redacted_thinking"})
#: Message fields that hold reasoning beside the content, in the order they are read.
_REASONING_FIELDS = ("reasoning_content", "reasoning", "thinking")


@dataclass(frozen=True)
class Usage:
    """Token counts of one reply (tokens).

    Attributes:
        prompt_tokens: ``usage.prompt_tokens``.
        completion_tokens: completion tokens *including* reasoning tokens (see the module docstring).
        reasoning_tokens: ``usage.completion_tokens_details.reasoning_tokens`` (0 when not given).
    """

    prompt_tokens: int
    completion_tokens: int
    reasoning_tokens: int = 0


@dataclass(frozen=True)
class CompletionParts:
    """What a chat-completion body holds.

    Attributes:
        text: the answer text (string content, or the text blocks joined by ``\\n``; ``""`` when none).
        reasoning: reasoning sent beside the answer (fields or thinking blocks, joined by ``\\n``; ``""`` when
            none). Reasoning inside ``text`` (``<think>``) is not split off here.
        finish_reason: ``choices[0].finish_reason`` (``None`` when absent).
        usage: the token counts, ``None`` when the reply had no usable ``usage`` block.
    """

    text: str
    reasoning: str
    finish_reason: str | None
    usage: Usage | None


def read_completion(data: object) -> CompletionParts:
    """Read a decoded chat-completion body.

    Raises:
        JudgeError: ``bad_reply``: the body is not a chat completion.
    """
    if not isinstance(data, dict) or not isinstance(data.get("choices"), list):
        raise JudgeError("bad_reply", "the reply is not a chat completion")
    choices = data["choices"]
    choice = choices[0] if choices and isinstance(choices[0], dict) else {}
    message = choice.get("message")
    message = message if isinstance(message, dict) else {}
    text, block_reasoning = _content(message.get("content"))
    reasoning = [r for r in (_block_text(message.get(f)) for f in _REASONING_FIELDS) if r]
    if block_reasoning:
        reasoning.append(block_reasoning)
    finish = choice.get("finish_reason")
    return CompletionParts(
        text=text,
        reasoning="\n".join(reasoning),
        finish_reason=finish if isinstance(finish, str) else None,
        usage=_usage(data.get("usage")),
    )


def _content(content: Any) -> tuple[str, str]:
    """``(answer text, reasoning)`` of ``message.content`` (a string or a list of content blocks)."""
    if isinstance(content, str):
        return content, ""
    if not isinstance(content, list):
        return "", ""
    texts: list[str] = []
    thoughts: list[str] = []
    for block in content:
        if isinstance(block, str):
            texts.append(block)
            continue
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind in _TEXT_BLOCKS:
            texts.append(_block_text(block.get("text")))
        elif kind in _REASONING_BLOCKS:
            thoughts.append(
                next((t for t in (_block_text(block.get(k)) for k in ("thinking", "reasoning", "text", "summary"))
                      if t), "")
            )  # fmt: skip
    return "\n".join(t for t in texts if t), "\n".join(t for t in thoughts if t)


def _block_text(value: Any) -> str:
    """The text of a field that is a string, a text block, or a list of them (``""`` otherwise)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return _block_text(value.get("text"))
    if isinstance(value, list):
        return "\n".join(t for t in (_block_text(v) for v in value) if t)
    return ""


def _count(v: object) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else 0


def _usage(usage: object) -> Usage | None:
    if not isinstance(usage, dict) or not isinstance(usage.get("prompt_tokens"), int):
        return None
    prompt = _count(usage.get("prompt_tokens"))
    completion = _count(usage.get("completion_tokens"))
    details = usage.get("completion_tokens_details")
    reasoning = _count(details.get("reasoning_tokens")) if isinstance(details, dict) else 0
    total = usage.get("total_tokens")
    beside = reasoning > 0 and (
        reasoning > completion or (isinstance(total, int) and total >= prompt + completion + reasoning)
    )
    return Usage(prompt, completion + reasoning if beside else completion, reasoning)
