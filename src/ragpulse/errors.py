"""The ragpulse error tree.

::

    RagpulseError                 base of every error ragpulse raises on purpose
    ├── ConfigError               invalid configuration (file, environment, prompt template); not retriable
    │   └── ServiceError          a request the service layer cannot serve (CLI exit 2)
    │       ├── BadRequest        a value it cannot use: bad name, cursor, time span, body        [HTTP 422]
    │       └── Conflict          the name or id exists already / the run has finished            [HTTP 409]
    ├── IngestError               a source could not read or decode input (bad event, bad OTLP payload)
    │   └── SourceFailedError     a source of ``serve`` died on its own (exit 3)
    ├── JudgeError                a judge could not get a usable verdict (model unavailable, bad output)
    ├── StoreError                the result store failed; ``retriable`` says whether to try again
    ├── NotFoundError             a named thing (run, test set, trace) does not exist; not retriable  [HTTP 404]
    ├── PayloadTooLarge           a request body over its size limit (OTLP, portal uploads)          [HTTP 413]
    └── ExportError               a metrics/events exporter failed (never raised to producers)

Library errors (asyncpg, aiokafka, openai, httpx) are translated to these at one boundary per layer and
chained with ``raise … from``.
"""

from __future__ import annotations

__all__ = [
    "BadRequest",
    "ConfigError",
    "Conflict",
    "ExportError",
    "IngestError",
    "JudgeError",
    "NotFoundError",
    "PayloadTooLarge",
    "RagpulseError",
    "ServiceError",
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


class ServiceError(ConfigError):
    """Base of the service layer's request errors (runs, portal); the message is one line for people."""


class BadRequest(ServiceError):
    """A request value the service cannot use; the message says which and why.

    ``code``: a machine reason (e.g. ``too_many_cases``, ``too_deep``) that HTTP answers carry as the problem's
    ``code`` member; ``None`` for the plain kind.
    """

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


class Conflict(ServiceError):
    """The request conflicts with what is stored (existing id, finished run)."""


class PayloadTooLarge(RagpulseError):
    """A request body (an OTLP export after decompression, a portal upload) is larger than its limit. Every HTTP
    edge answers it with 413 (gRPC: ``RESOURCE_EXHAUSTED``).

    Attributes:
        limit: the limit that was exceeded, in bytes.
    """

    def __init__(self, message: str, *, limit: int) -> None:
        super().__init__(message)
        self.limit = limit
