"""The portal's REST API under ``/api/v1``: one module-level ``router`` per area (test sets, runs, traces),
included by :func:`ragpulse.portal.app.build_app`."""
