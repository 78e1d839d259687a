"""Errors of the service layer, one per answer the adapters give (CLI exit 2 / HTTP status in brackets).

::

    ServiceError (ConfigError)
    ├── BadRequest     a value the service cannot use: bad name, cursor, time span, body  [422]
    ├── NotFound       an unknown test set, case, trace or run                              [404]
    └── Conflict       the name or id exists already / the run has finished               [409]
"""

from __future__ import annotations

from ragpulse.errors import ConfigError, NotFoundError

__all__ = ["BadRequest", "Conflict", "NotFound", "ServiceError"]


class ServiceError(ConfigError):
    """Base of the service layer's request errors; the message is one line for people."""


class BadRequest(ServiceError):
    """A request value the service cannot use; the message says which and why."""


class NotFound(ServiceError, NotFoundError):
    """The named thing does not exist (also a :class:`~ragpulse.errors.NotFoundError`, as the run services
    raise)."""


class Conflict(ServiceError):
    """The request conflicts with what is stored (existing id, finished run)."""
