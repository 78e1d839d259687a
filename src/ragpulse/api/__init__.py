"""The portal's HTTP side: the REST API under ``/api/v1`` and the web UI at ``/`` (one FastAPI app on its own
listener, ``RAGPULSE_API_ADDRESS``). A thin adapter over :mod:`ragpulse.services`; see ``docs/portal.md``."""

from ragpulse.api.app import build_app
from ragpulse.api.context import ApiOptions, PortalContext
from ragpulse.api.server import PortalServer, check_exposure

__all__ = ["ApiOptions", "PortalContext", "PortalServer", "build_app", "check_exposure"]
