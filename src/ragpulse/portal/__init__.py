"""The portal's HTTP side: the REST API under ``/api/v1`` and the web UI at ``/`` (one FastAPI app on its own
listener, ``RAGPULSE_API_ADDRESS``). Routes (``rest/``, ``ui/``) are thin adapters over :mod:`ragpulse.runs` and the
portal services here (traces, stats, dead letters, evaluate, run history); see ``docs/portal.md``."""

from ragpulse.portal.app import build_app
from ragpulse.portal.context import ApiOptions, PortalContext
from ragpulse.portal.server import PortalServer, check_exposure, open_portal

__all__ = ["ApiOptions", "PortalContext", "PortalServer", "build_app", "check_exposure", "open_portal"]
