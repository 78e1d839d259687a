"""Corrected pass rates in replay reports and gates: a calibration profile for the judge's version turns the
run's observed pass rate into ``judges.<name>.pass_rate_corrected.{value,lower,upper}``, which ``gate`` reads
with metric suffixes parsed from the right."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ragpulse.cli import app
from ragpulse.store.postgres import PostgresStore
from testsupport import calibration_profile

FACT = "The Kestrel 7 router ships with a two-year warranty and supports Wi-Fi 7."


def _test_set(path: Path) -> Path:
    rows = []
    for i in range(40):
        grounded = i < 30
        answer = (
            "The Kestrel 7 router ships with a two-year warranty."
            if grounded
            else "It is made of cheese on Mars."
        )
        rows.append({"id": f"c{i}", "question": f"What warranty does the Kestrel 7 have? ({i})", "contexts": [FACT],
                     "answer": answer})  # fmt: skip
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def _replay(*args: str) -> dict[str, Any]:
    res = CliRunner().invoke(app, ["replay", *args, "--judges", "faithfulness", "--json"])
    assert res.exit_code in (0, 1), res.output
    out: dict[str, Any] = json.loads(res.stdout)
    return out


async def _save_profile(url: str, version: str) -> None:
    store = await PostgresStore.connect(url)
    try:
        await store.save_calibration_profile(calibration_profile(version, name="kestrel-labels"))
    finally:
        await store.close()


def test_report_and_gate_carry_the_corrected_pass_rate(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGPULSE_STORE_DATABASE_URL", pg_url)
    cases = _test_set(tmp_path / "kestrel40.jsonl")
    before = _replay(str(cases), "--run-id", "uncalibrated")
    stats = before["judges"]["faithfulness"]
    assert stats["scored"] == 40
    assert stats["pass_rate_corrected"] is None  # no profile for this version yet

    version = _run_versions(pg_url)["faithfulness"]
    asyncio.run(_save_profile(pg_url, version))

    after = _replay(str(cases), "--run-id", "calibrated")
    stats = after["judges"]["faithfulness"]
    observed = stats["pass_rate"]
    assert observed == 0.75  # the 30 grounded answers pass, the 10 invented ones fail
    corrected = stats["pass_rate_corrected"]
    assert corrected["profile"] == "kestrel-labels"
    assert corrected["value"] == pytest.approx(min(1.0, max(0.0, (observed + 0.9 - 1) / 0.8)))
    assert corrected["lower"] <= corrected["value"] <= corrected["upper"]

    gate = CliRunner().invoke(
        app,
        [
            "gate",
            "calibrated",
            "--min",
            f"faithfulness.pass_rate_corrected.lower={corrected['lower'] - 0.01:.4f}",
        ],
    )
    assert gate.exit_code == 0, gate.output
    gate = CliRunner().invoke(
        app,
        [
            "gate",
            "calibrated",
            "--min",
            f"faithfulness.pass_rate_corrected.upper={corrected['upper'] + 0.01:.4f}",
        ],
    )
    assert gate.exit_code == 1, gate.output
    # a run without a corrected figure cannot pass a gate on it
    gate = CliRunner().invoke(app, ["gate", "uncalibrated", "--min", "faithfulness.pass_rate_corrected=0.1"])
    assert gate.exit_code == 1, gate.output


def _run_versions(url: str) -> dict[str, str]:
    async def q() -> dict[str, str]:
        store = await PostgresStore.connect(url)
        try:
            run = await store.get_run("uncalibrated")
            assert run is not None
            return dict(run.judges)
        finally:
            await store.close()

    return asyncio.run(q())
