"""Which traces are judged: one decision function with a written precedence.

Precedence, first match wins (:meth:`SamplingPolicy.decide`):

1. **Test traffic is always judged**: replays (``source == replay``), traces that belong to a run (a run id on
   the wire — ``replay --via`` marks its synthetic traces this way) and ``/evaluate`` calls (``source == api``).
   A run must never end ``completed`` with cases left unjudged by sampling.
2. **Always-judge predicates** (``sampling.always_judge``): a trace matching any of them is judged.
3. **App/scenario rules** (``sampling.rules``): the first rule whose ``app`` and ``scenario`` (each optional,
   exact match) fit the trace sets the rate.
4. **The global rate** (``sampling_rate``).

Rates are applied deterministically: a trace id maps to a point in [0, 1) by SHA-256
(:func:`sample_point`), so the same trace gets the same decision on every replica and every run, and a trace
sampled at rate 0.1 is also sampled at 0.2.

Predicate syntax (one condition per predicate, ``FIELD OP VALUE``)::

    attributes.user.feedback == "negative"
    top_document_score < 0.3
    latency_s >= 10
    answer contains "sorry"

FIELD is a trace field (``app``, ``scenario``, ``model``, ``question``, ``answer``, ``context``,
``latency_s``, ``source``), ``top_document_score`` (score of the first-ranked document) or
``attributes.KEY`` (KEY may contain dots: the whole rest is the attribute name). OP is one of
``== != < <= > >= contains``. VALUE is a JSON literal (number, "string", true, false, null). A missing field
matches nothing (``!=`` included), and ordering operators need numbers on both sides.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ragpulse.errors import ConfigError
from ragpulse.model import Trace

__all__ = [
    "Predicate",
    "SamplingDecision",
    "SamplingPolicy",
    "SamplingRule",
    "is_sampled",
    "parse_predicate",
    "sample_point",
]

_SCALE = float(1 << 64)


def sample_point(trace_id: str) -> float:
    """Map a trace id to a point in [0, 1): the first 8 bytes of ``sha256(trace_id)`` (UTF-8) over 2**64."""
    digest = hashlib.sha256(trace_id.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") / _SCALE


def is_sampled(trace_id: str, rate: float) -> bool:
    """True when the trace is judged at sampling ``rate`` (0–1): ``sample_point(trace_id) < rate``.

    ``rate >= 1`` samples everything and ``rate <= 0`` nothing, without hashing.
    """
    if rate >= 1.0:
        return True
    if rate <= 0.0:
        return False
    return sample_point(trace_id) < rate


_PREDICATE = re.compile(
    r"^\s*(?P<field>[A-Za-z_][\w.\-]*)\s*(?P<op>==|!=|<=|>=|<|>|\bcontains\b)\s*(?P<value>.+?)\s*$"
)
_TRACE_FIELDS = ("app", "scenario", "model", "question", "answer", "context", "latency_s", "source")
_MISSING = object()


def _field_getter(field: str) -> Callable[[Trace], Any]:
    if field.startswith("attributes."):
        key = field.removeprefix("attributes.")
        return lambda t: t.attributes.get(key, _MISSING)
    if field == "top_document_score":

        def top(t: Trace) -> Any:
            ranked = sorted(t.documents, key=lambda d: (d.rank is None, d.rank if d.rank is not None else 0))
            return ranked[0].score if ranked and ranked[0].score is not None else _MISSING

        return top
    if field in _TRACE_FIELDS:
        return lambda t: v if (v := getattr(t, field)) is not None else _MISSING
    known = ", ".join((*_TRACE_FIELDS, "top_document_score", "attributes.KEY"))
    raise ConfigError(f"always_judge: unknown field {field!r} (known: {known})")


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "==": lambda a, b: bool(a == b),
    "!=": lambda a, b: bool(a != b),
    "<": lambda a, b: _is_number(a) and _is_number(b) and a < b,
    "<=": lambda a, b: _is_number(a) and _is_number(b) and a <= b,
    ">": lambda a, b: _is_number(a) and _is_number(b) and a > b,
    ">=": lambda a, b: _is_number(a) and _is_number(b) and a >= b,
    "contains": lambda a, b: isinstance(a, str) and isinstance(b, str) and b.casefold() in a.casefold(),
}


@dataclass(frozen=True)
class Predicate:
    """One always-judge condition (see the module docstring for the syntax); ``text`` is its source."""

    text: str
    get: Callable[[Trace], Any]
    op: str
    value: Any

    def __call__(self, trace: Trace) -> bool:
        """True when ``trace`` matches; a missing field matches nothing."""
        actual = self.get(trace)
        if actual is _MISSING:
            return False
        return _COMPARE[self.op](actual, self.value)


def parse_predicate(text: str) -> Predicate:
    """Parse ``FIELD OP VALUE``.

    Raises:
        ConfigError: not of that form, an unknown field, a VALUE that is not a JSON literal, or an ordering
            operator with a non-number or ``contains`` with a non-string.
    """
    m = _PREDICATE.match(text)
    if m is None:
        raise ConfigError(f'always_judge: {text!r} is not "FIELD OP VALUE" (OP: == != < <= > >= contains)')
    field, op, raw = m["field"], m["op"], m["value"]
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        raise ConfigError(
            f'always_judge: {text!r}: value {raw} is not a JSON literal (quote strings: "negative")'
        ) from None
    if isinstance(value, dict | list):
        raise ConfigError(f"always_judge: {text!r}: value must be a number, string, true, false or null")
    if op in ("<", "<=", ">", ">=") and not _is_number(value):
        raise ConfigError(f"always_judge: {text!r}: {op} needs a number")
    if op == "contains" and not isinstance(value, str):
        raise ConfigError(f"always_judge: {text!r}: contains needs a string")
    return Predicate(text=text, get=_field_getter(field), op=op, value=value)


@dataclass(frozen=True)
class SamplingRule:
    """A sampling rate for the traces of one app and/or scenario (``None`` = any)."""

    rate: float
    app: str | None = None
    scenario: str | None = None

    def matches(self, trace: Trace) -> bool:
        """True when every given key equals the trace's."""
        return (self.app is None or self.app == trace.app) and (
            self.scenario is None or self.scenario == trace.scenario
        )


@dataclass(frozen=True)
class SamplingDecision:
    """The decision and the step of the precedence that made it.

    ``by`` is ``test_traffic``, ``always_judge:<predicate>``, ``rule:<app>/<scenario>`` (``*`` for any) or
    ``rate``; ``rate`` is the rate applied (1.0 for the first two steps).
    """

    sampled: bool
    by: str
    rate: float


@dataclass(frozen=True)
class SamplingPolicy:
    """The one sampling decision (precedence in the module docstring)."""

    rate: float = 1.0
    rules: Sequence[SamplingRule] = ()
    always_judge: Sequence[Predicate] = ()

    @classmethod
    def build(
        cls, rate: float, rules: Sequence[SamplingRule] = (), always_judge: Sequence[str] = ()
    ) -> SamplingPolicy:
        """Policy from settings values; predicates are parsed here (``ConfigError`` at start-up)."""
        return cls(
            rate=rate, rules=tuple(rules), always_judge=tuple(parse_predicate(p) for p in always_judge)
        )

    def decide(self, trace: Trace) -> SamplingDecision:
        """Whether ``trace`` is judged, and why."""
        if trace.is_test_traffic:
            return SamplingDecision(True, "test_traffic", 1.0)
        for predicate in self.always_judge:
            if predicate(trace):
                return SamplingDecision(True, f"always_judge:{predicate.text}", 1.0)
        for rule in self.rules:
            if rule.matches(trace):
                by = f"rule:{rule.app or '*'}/{rule.scenario or '*'}"
                return SamplingDecision(is_sampled(trace.trace_id, rule.rate), by, rule.rate)
        return SamplingDecision(is_sampled(trace.trace_id, self.rate), "rate", self.rate)
