"""The JSON schema of each judge prompt's reply, sent as structured output where the server has it.

With ``judge.structured_output: auto`` (the default) or ``json_schema``,
:meth:`ragpulse.judges.frame.JudgeBase.ask` sends ``response_format: {"type": "json_schema", "json_schema":
{"name": <template>, "schema": …, "strict": false}}`` (:func:`response_format`) for every template that asks for JSON (:data:`REPLY_SCHEMAS`); the yes/no
templates (``relevancy``, ``relevancy_context``, ``faithfulness_binary``) ask for a verdict on the first line, not
JSON, and send none. ``strict`` is false: the schemas accept every shape the one parser scores
(:mod:`ragpulse.judges.model.parsing` and each judge's reading of the object — ``claims`` or ``statements``,
``supported`` or ``verdict``, verdicts as booleans, 0/1 or words, scores as numbers or strings such as
``"4/5"``), which OpenAI's strict mode (every property required, no alternatives) cannot say. The reply is
parsed as any other; the schema only steers the model (``tests/judges/test_structured_output.py`` checks that
each schema accepts every reply its judge scores, over a table of sample replies).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["REPLY_SCHEMAS", "response_format"]

#: A yes/no value as the parser reads it (:func:`~ragpulse.judges.model.parsing.normalize_verdict_word`).
_VERDICT: Mapping[str, Any] = {"type": ["boolean", "string", "integer", "number"]}
_TEXT: Mapping[str, Any] = {"type": "string"}
#: A passage or claim number (an integer; a digit string is read too).
_NUMBER: Mapping[str, Any] = {"type": ["integer", "string"]}
_SCORE: Mapping[str, Any] = {
    "type": "object",
    "properties": {"score": {"type": ["number", "string"]}, "rating": {"type": ["number", "string"]},
                   "reason": _TEXT, "explanation": _TEXT},
    "anyOf": [{"required": ["score"]}, {"required": ["rating"]}],
}  # fmt: skip
_CLAIM: Mapping[str, Any] = {
    "type": "object",
    "properties": {"claim": _TEXT, "statement": _TEXT, "text": _TEXT, "supported": _VERDICT, "verdict": _VERDICT},
    "anyOf": [{"required": ["supported"]}, {"required": ["verdict"]}],
}  # fmt: skip


def _passages(key: str) -> Mapping[str, Any]:
    return {
        "type": "object",
        "properties": {
            "verdicts": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"passage": _NUMBER, key: _VERDICT},
                    "required": [key],
                },
            }
        },
        "required": ["verdicts"],
    }


def _statement_lists() -> Mapping[str, Any]:
    """``answer_correctness``: ``tp``/``fp``/``fn`` (or upper case) lists; any item is read as its text."""
    lists = {k: {"type": "array"} for k in ("tp", "fp", "fn")}
    return {"type": "object", "properties": {**lists, **{k.upper(): v for k, v in lists.items()}}}


#: Template name → the JSON schema of its reply (templates that ask for JSON only).
REPLY_SCHEMAS: Mapping[str, Mapping[str, Any]] = {
    "relevancy_graded": _SCORE,
    "relevancy_context_graded": _SCORE,
    "faithfulness_claims": {
        "type": "object",
        "properties": {"claims": {"type": "array", "items": _CLAIM}, "statements": {"type": "array", "items": _CLAIM}},
        "anyOf": [{"required": ["claims"]}, {"required": ["statements"]}],
    },
    "faithfulness_attribution": {
        "type": "object",
        "properties": {
            "verdicts": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"claim": {"type": "integer"}, "passage": {"type": ["integer", "null"]}},
                    "required": ["claim"],
                },
            }
        },
        "required": ["verdicts"],
    },
    "context_precision": _passages("useful"),
    "context_relevance": _passages("relevant"),
    "context_recall": {
        "type": "object",
        "properties": {
            "statements": {
                "type": "array",
                "items": {"type": "object", "properties": {"statement": _TEXT, "supported": _VERDICT},
                          "required": ["supported"]},
            }
        },
        "required": ["statements"],
    },
    "answer_correctness": _statement_lists(),
    "checklist_item": {
        "type": "object",
        "properties": {"pass": _VERDICT, "passed": _VERDICT, "reason": _TEXT},
        "anyOf": [{"required": ["pass"]}, {"required": ["passed"]}],
    },
}  # fmt: skip


def response_format(template: str) -> dict[str, Any] | None:
    """The ``response_format`` of a request rendered from ``template``: ``{"type": "json_schema",
    "json_schema": {"name": template, "schema": …, "strict": False}}``, or ``None`` for a template that does
    not ask for JSON."""
    schema = REPLY_SCHEMAS.get(template)
    if schema is None:
        return None
    return {"type": "json_schema", "json_schema": {"name": template, "schema": schema, "strict": False}}
