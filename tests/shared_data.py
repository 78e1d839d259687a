"""Locate the shared read-only datasets (``RAGPULSE_SHARED_DIR``, default the sibling ``shared/`` of the repo)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from testsupport import shared_dir

REPO = Path(__file__).resolve().parents[1]


def rgb_path() -> Path:
    p = shared_dir() / "datasets" / "rgb_zh" / "rgb_zh.sample.jsonl"
    if not p.is_file():
        pytest.skip(f"shared dataset not found: {p}")
    return p


def rgb_rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in rgb_path().read_text("utf-8").splitlines() if line.strip()]
