"""The RGB (Chinese) sample of the test data folder (``testsupport.shared_dir``: ``tests/data`` unless
``RAGPULSE_SHARED_DIR`` names another)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from testsupport import shared_dir

REPO = Path(__file__).resolve().parents[1]


def rgb_path() -> Path:
    return shared_dir() / "datasets" / "rgb_zh" / "rgb_zh.sample.jsonl"


def rgb_rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in rgb_path().read_text("utf-8").splitlines() if line.strip()]
