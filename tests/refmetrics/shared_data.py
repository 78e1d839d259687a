"""Locate the shared read-only datasets (``RAGPULSE_SHARED_DIR``, default the sibling ``shared/`` of the repo)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


def shared_dir() -> Path:
    env = os.environ.get("RAGPULSE_SHARED_DIR")
    if env:
        return Path(env)
    for cand in (REPO / ".." / "shared", REPO / ".." / ".." / "shared"):
        if cand.is_dir():
            return cand.resolve()
    return (REPO / ".." / "shared").resolve()


def rgb_path() -> Path:
    p = shared_dir() / "datasets" / "rgb_zh" / "rgb_zh.sample.jsonl"
    if not p.is_file():
        pytest.skip(f"shared dataset not found: {p}")
    return p


def rgb_rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in rgb_path().read_text("utf-8").splitlines() if line.strip()]
