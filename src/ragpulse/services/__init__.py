"""Library services: what the CLI and the HTTP API do, as async functions over an open store.

Each takes typed arguments (settings, a store typed by :mod:`ragpulse.protocols`, names) and returns typed
pydantic models; none prints or exits. The CLI commands and the API routes are thin adapters over them.

- :mod:`~ragpulse.services.replay` — replay a test set (in process, or ``--via`` Kafka/OTLP through ``serve``).
- :mod:`~ragpulse.services.runs` — list runs, a run's report, compare two runs, re-judge stored traces.
- :mod:`~ragpulse.services.reports` / :mod:`~ragpulse.services.report_model` — the typed
  :class:`~ragpulse.services.report_model.RunReport` and how it is computed;
  :mod:`~ragpulse.services.diagnosis` — the weak side (retrieval or generation).
- :mod:`~ragpulse.services.gate` — thresholds (``--fail-under``, ``gate --min``) and the CI gate;
  :mod:`~ragpulse.services.junit` — its JUnit XML; :mod:`~ragpulse.services.compare` — run comparison.
- :mod:`~ragpulse.services.judges` — building a command's judges with their shared LLM client.
- The portal's: test sets, traces, stats, dead letters, evaluate, calibration (one module each).
"""
