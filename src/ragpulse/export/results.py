"""The results stream's event: one stored judgement as a JSON object (snake_case), keyed for de-duplication.

Schema: ``ragpulse/export/judgement_event.schema.json``. Fields: ``trace_id``, ``app``, ``scenario``, ``judge``,
``version``, ``status`` (``ok``/``skipped``/``error``), ``score`` (0–1, ``ok`` only), ``passed`` (``ok``
only), ``reason``, ``decided_by``, ``stage`` (the cascade stage, when the judgement came from a cascade),
``time`` (RFC 3339, UTC: when the judgement was stored), and the trace's conversation and the app's usage:
``session_id``, ``model`` (the app's answering model), ``prompt_tokens``/``completion_tokens`` (its answering
call), ``total_prompt_tokens``/``total_completion_tokens`` (every LLM call of the trace) and ``app_cost`` (at
the price table, ``None`` when a model is not in it or no usage is known). The message key is ``trace_id:judge:version``: a
consumer that keeps the last value per key sees every judgement once, whatever the at-least-once delivery
repeats. Under ``redact_text`` the stored reason is already reduced to its code.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from ragpulse.model import ModelPrice, ModelUsage, usage_cost

__all__ = ["encode_event", "event_key", "judgement_event"]


def judgement_event(row: Mapping[str, Any], prices: Mapping[str, ModelPrice] | None = None) -> dict[str, Any]:
    """The event of one stored judgement row (see ``PostgresStore.publish_pending`` for the row's keys); the
    app's cost at ``prices`` (``export.model_prices``)."""
    flags = row.get("flags") or {}
    when = row["time"]
    if isinstance(when, datetime):
        when = when.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return {
        "trace_id": row["trace_id"],
        "app": row.get("app"),
        "scenario": row.get("scenario"),
        "judge": row["judge"],
        "version": row["version"],
        "status": row["status"],
        "score": row.get("score"),
        "passed": row.get("passed"),
        "reason": row.get("reason") or "",
        "decided_by": flags.get("decided_by") if isinstance(flags, Mapping) else None,
        "stage": flags.get("stage") if isinstance(flags, Mapping) else None,
        "time": when,
        "session_id": row.get("session_id"),
        "model": row.get("trace_model"),
        "prompt_tokens": row.get("prompt_tokens"),
        "completion_tokens": row.get("completion_tokens"),
        "total_prompt_tokens": row.get("total_prompt_tokens"),
        "total_completion_tokens": row.get("total_completion_tokens"),
        "app_cost": usage_cost([ModelUsage.model_validate(u) for u in row.get("usage") or ()], prices or {}),
    }


def event_key(event: Mapping[str, Any]) -> bytes:
    """``trace_id:judge:version`` as UTF-8 (the de-duplication key)."""
    return f"{event['trace_id']}:{event['judge']}:{event['version']}".encode("utf-8", "replace")


def encode_event(event: Mapping[str, Any]) -> bytes:
    """The message value: compact JSON, UTF-8."""
    return json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "replace")
