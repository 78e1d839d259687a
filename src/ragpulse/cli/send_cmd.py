"""``ragpulse send FILE --to kafka|otlp``: publish trace events from a JSONL file, for trying ragpulse out.

``--to kafka`` produces every non-blank line as is (invalid lines too, so the dead-letter topic can be seen at
work) to ``--topic`` (default: the first of ``kafka_topics``); a line the brokers refuse for its size is
reported (``line N: skipped: too_large: …``) and the rest is sent. ``--to otlp`` parses each line as a trace event
(the Kafka event schema) and posts it as OpenInference spans to the OTLP/HTTP receiver (``--endpoint``,
default ``http://<otlp_http_address>``); lines that do not parse are reported and skipped.
A file that looks like a test set — JSON objects with test-case fields (``question``, ``expected_answer`` …) and
no line with a ``traceId`` — is refused before anything is sent, with a hint to ``ragpulse replay FILE --via
kafka|otlp`` (which turns cases into trace events).
Exit codes: 0 all lines sent, 2 some lines were skipped (input error; the others were sent), a test set was
given, or a configuration error, 3 the broker or receiver could not be reached.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ragpulse.cli import _common, app
from ragpulse.errors import ConfigError

if TYPE_CHECKING:  # the ingest modules are imported in the command: `ragpulse --help` stays light
    from ragpulse.model import Trace

__all__ = ["Target", "send"]


class Target(StrEnum):
    """Where ``send`` publishes."""

    KAFKA = "kafka"
    OTLP = "otlp"


_TRACE_IDS = ("traceId", "trace_id")


@cache
def _case_only_fields() -> frozenset[str]:
    """Test-set fields that trace events do not have (``question``, ``answer``, ``expected_answer`` … are
    shared)."""
    from ragpulse.ingest.events import event_schema
    from ragpulse.runs.testset_files import FIELD_ALIASES

    return frozenset(a for names in FIELD_ALIASES.values() for a in names) - set(event_schema()["properties"])


def _scan(lines: Sequence[bytes]) -> tuple[bool, bool]:
    """``(any line carries a trace id, some JSON object line has a field only test cases have)``."""
    case_like = False
    case_only = _case_only_fields()
    for ln in lines:
        try:
            row = json.loads(ln)
        except ValueError:
            continue
        if not isinstance(row, dict):
            continue
        if any(k in row for k in _TRACE_IDS):
            return True, case_like
        case_like = case_like or any(k in row for k in case_only)
    return False, case_like


def _replay_hint(file: Path, to: Target) -> str:
    return f"to send a test set's cases as traces through a running serve, run: ragpulse replay {file} --via {to.value}"


@app.command()
def send(
    file: Annotated[
        Path,
        typer.Argument(
            metavar="FILE", exists=True, dir_okay=False, readable=True, help="JSONL file of trace events."
        ),
    ],
    to: Annotated[
        Target, typer.Option("--to", help="kafka (raw events) or otlp (OpenInference spans).")
    ] = Target.KAFKA,
    topic: Annotated[
        str | None, typer.Option("--topic", help="Kafka topic (default: first of kafka_topics).")
    ] = None,
    endpoint: Annotated[
        str | None, typer.Option("--endpoint", help="OTLP/HTTP base URL (default: otlp_http_address).")
    ] = None,
) -> None:
    """Publish trace events from a JSONL file to Kafka or to an OTLP receiver."""
    from ragpulse.ingest.events import EventRejected, parse_event
    from ragpulse.ingest.publish import publish_kafka, publish_otlp

    settings = _common.settings()
    try:
        data = file.read_bytes()
    except OSError as e:
        raise ConfigError(f"cannot read {file}: {e}") from e
    numbered = [(i, ln) for i, ln in enumerate(data.splitlines(), 1) if ln.strip()]
    lines = [ln for _, ln in numbered]
    has_trace_ids, case_like = _scan(lines)
    if case_like and not has_trace_ids:
        raise ConfigError(
            f"{file} looks like a test set (cases without traceId), not trace events: send publishes trace "
            f"events (traceId, question, answer, contexts …; docs/ingestion.md); {_replay_hint(file, to)}"
        )
    skipped = 0
    if to is Target.KAFKA:

        def report(index: int, reason: str) -> None:
            nonlocal skipped
            skipped += 1
            typer.secho(f"line {numbered[index][0]}: skipped: {reason}", err=True, fg=typer.colors.YELLOW)

        n = asyncio.run(publish_kafka(settings.kafka, lines, topic, on_skip=report))
        note = f" ({skipped} lines skipped)" if skipped else ""
        typer.echo(f"sent {n} events to Kafka topic {topic or settings.kafka.topics[0]}{note}")
    else:
        traces: list[Trace] = []
        for i, ln in numbered:
            try:
                traces.append(
                    parse_event(ln, max_bytes=settings.kafka.max_message_bytes, log_text=settings.log.text)
                )
            except EventRejected as e:
                skipped += 1
                typer.secho(f"line {i}: skipped: {e.reason}", err=True, fg=typer.colors.YELLOW)
        n = asyncio.run(publish_otlp(settings.otlp, traces, endpoint))
        typer.echo(f"sent {n} traces as OTLP spans ({skipped} lines skipped)")
    if skipped:
        hint = "" if has_trace_ids else f" (no line has a traceId: {_replay_hint(file, to)})"
        raise _common.fail(f"{file}: {skipped} line(s) were skipped (see above); the others were sent{hint}")
