"""Errors of the service layer, one per answer the adapters give (CLI exit 2 / HTTP status in brackets).

::

    ServiceError (ConfigError)
    ├── BadRequest     a value the service cannot use: bad name, cursor, time span, body  [422]
    └── Conflict       the name or id exists already / the run has finished               [409]

An unknown test set, case, trace or run is :class:`ragpulse.errors.NotFoundError` [404], the one "not found"
type of every layer.
"""

from __future__ import annotations

from ragpulse.errors import ConfigError

__all__ = ["BadRequest", "Conflict", "ServiceError"]


class ServiceError(ConfigError):
    """Base of the service layer's request errors; the message is one line for people."""


class BadRequest(ServiceError):
    """A request value the service cannot use; the message says which and why."""


class Conflict(ServiceError):
    """The request conflicts with what is stored (existing id, finished run)."""
