"""The sidecar (``ragpulse serve``): sources, engine, store and exporters wired together
(:mod:`~ragpulse.sidecar.serve`), the ``/healthz`` ``/readyz`` ``/metrics`` listener
(:mod:`~ragpulse.sidecar.health`), its background loops (retention, corrected pass rates:
:mod:`~ragpulse.sidecar.background`) and the results stream to Kafka (:mod:`~ragpulse.sidecar.results_stream`).

The portal is handed in by the CLI (:data:`~ragpulse.sidecar.serve.PortalHook`), so this package never imports
:mod:`ragpulse.portal`.
"""

from ragpulse.sidecar.serve import run_serve

__all__ = ["run_serve"]
