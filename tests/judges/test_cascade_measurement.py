"""``bench/cascade.py`` (the cascade table of docs/judges.md) re-run on a slice of the shared labelled sets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from testsupport import shared_dir

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.integration  # slow check (a bench in a subprocess, ~3 s CPU): the integration lane, docs/dev/testing.md
def test_cascade_measurement_on_a_slice() -> None:
    env = {**os.environ, "RAGPULSE_SHARED_DIR": str(shared_dir())}
    out = subprocess.run(
        [sys.executable, str(REPO / "bench" / "cascade.py"), "--limit", "4", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=True,
    )
    rows = {(r["oracle"], r["config"]): r for r in json.loads(out.stdout)}
    assert len(rows) == 14
    n = rows[("perfect", "main only")]["cases"]
    assert n == 12  # 4 rows of each of the three sets
    # the label oracle is the upper bound: the main judge alone agrees with every human label
    assert rows[("perfect", "main only")]["balanced_accuracy"] == 1.0
    assert rows[("perfect", "main only")]["calls_saved"] == 0.0
    assert rows[("perfect", "heuristic only")]["model_calls"] == 0
    # a band covering every score escalates every case the first stage scored: same calls, same verdicts
    full = rows[("perfect", "band [0.0, 1.0]")]
    assert full["model_calls"] == rows[("perfect", "main only")]["model_calls"]
    assert full["balanced_accuracy"] == 1.0
    # each band's calls are exactly its escalations (binary mode: one call per case on these rows)
    for oracle in ("perfect", "80%"):
        for band in ("band [0.2, 0.8]", "band [0.3, 0.7]", "band [0.4, 0.9]", "band [0.5, 0.8]"):
            r = rows[(oracle, band)]
            assert r["model_calls"] == round(r["escalated"] * n)
            assert r["calls_saved"] == round(
                1 - r["model_calls"] / rows[(oracle, "main only")]["model_calls"], 4
            )
    # one call per case whatever the oracle answers on these rows
    assert rows[("80%", "main only")]["model_calls"] == rows[("perfect", "main only")]["model_calls"]
