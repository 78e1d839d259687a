"""``ragpulse send FILE --to kafka|otlp``: publish trace events from a JSONL file, for trying ragpulse out.

``--to kafka`` produces every non-blank line as is (invalid lines too, so the dead-letter topic can be seen at
work) to ``--topic`` (default: the first of ``kafka_topics``); a line the brokers refuse for its size is
reported (``line N: skipped: too_large: …``) and the rest is sent. ``--to otlp`` parses each line as a trace event
(the Kafka event schema) and posts it as OpenInference spans to the OTLP/HTTP receiver (``--endpoint``,
default ``http://<otlp_http_address>``); lines that do not parse are reported and skipped.
Exit codes: 0 all lines sent, 2 some lines were skipped (input error; the others were sent) or a configuration
error, 3 the broker or receiver could not be reached.
"""

from __future__ import annotations

import asyncio
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from ragpulse.cli import _common, app
from ragpulse.errors import ConfigError
from ragpulse.ingest.events import EventRejected, parse_event
from ragpulse.ingest.publish import publish_kafka, publish_otlp
from ragpulse.model import Trace

__all__ = ["Target", "send"]


class Target(StrEnum):
    """Where ``send`` publishes."""

    KAFKA = "kafka"
    OTLP = "otlp"


@app.command()
def send(
    file: Annotated[
        Path, typer.Argument(exists=True, dir_okay=False, readable=True, help="JSONL file of trace events.")
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
    settings = _common.settings()
    try:
        data = file.read_bytes()
    except OSError as e:
        raise ConfigError(f"cannot read {file}: {e}") from e
    numbered = [(i, ln) for i, ln in enumerate(data.splitlines(), 1) if ln.strip()]
    lines = [ln for _, ln in numbered]
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
        raise _common.fail(f"{file}: {skipped} line(s) were skipped (see above); the others were sent")
