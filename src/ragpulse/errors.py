"""The ragpulse error tree.

::

    RagpulseError                 base of every error ragpulse raises on purpose
    ├── ConfigError               invalid configuration (file, environment, prompt template); not retriable
    ├── IngestError               a source could not read or decode input (bad event, bad OTLP payload)
    │   └── SourceFailedError     a source of ``serve`` died on its own (exit 3)
    ├── JudgeError                a judge could not get a usable verdict (model unavailable, bad output)
    ├── StoreError                the result store failed; ``retriable`` says whether to try again
    ├── NotFoundError             a named thing (run, test set, trace) does not exist; not retriable
    └── ExportError               a metrics/events exporter failed (never raised to producers)

Library errors (asyncpg, aiokafka, openai, httpx) are translated to these at one boundary per layer and
chained with ``raise … from``.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "ExportError",
    "IngestError",
    "JudgeError",
    "NotFoundError",
    "RagpulseError",
    "SourceFailedError",
    "StoreError",
]


class RagpulseError(Exception):
    """Base class. ``retriable`` tells callers whether the same call may succeed later."""

    retriable: bool = False

    def __init__(self, message: str, *, retriable: bool | None = None) -> None:
        super().__init__(message)
        if retriable is not None:
            self.retriable = retriable


class ConfigError(RagpulseError):
    """Raised at start-up for an invalid setting, config file or prompt template."""


class IngestError(RagpulseError):
    """Raised by a source for input it cannot decode; the input goes to the dead-letter topic/table."""


class JudgeError(RagpulseError):
    """Raised inside a judge when the model cannot give a usable verdict.

    ``code`` is the machine reason recorded in the judgement (``judge_unavailable``, ``unparseable``,
    ``out_of_range``, ``empty_output``, ``truncated_output``, ``over_budget``).
    """

    def __init__(self, code: str, message: str = "", *, retriable: bool | None = None) -> None:
        super().__init__(f"{code}: {message}" if message else code, retriable=retriable)
        self.code = code


class StoreError(RagpulseError):
    """Raised by the store. ``retriable=True`` for connection loss/timeouts, ``False`` for bad data."""


class NotFoundError(RagpulseError):
    """A run, test set or trace named by the caller does not exist (CLI exit 2, HTTP 404)."""


class ExportError(RagpulseError):
    """Raised by exporters during set-up; at run time exporters log and count instead of raising."""


class SourceFailedError(IngestError):
    """A source of ``ragpulse serve`` died on its own (the Kafka consume loop, the OTLP assembler): the process
    stops so that its orchestrator restarts it. Always retriable (exit code 3: a runtime failure)."""

    retriable = True

    def __init__(self, source: str, cause: BaseException) -> None:
        super().__init__(f"{source} source failed: {cause}")
        self.source = source
