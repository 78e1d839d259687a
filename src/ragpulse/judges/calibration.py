"""Deprecated alias of :mod:`ragpulse.calibration` (calibration scores judges, it is not one).

Kept for one release so ``from ragpulse.judges.calibration import calibrate`` keeps working; importing it emits a
``DeprecationWarning``. Import from :mod:`ragpulse.calibration` instead.
"""

from __future__ import annotations

import warnings

from ragpulse.calibration import (
    CalibrationReport,
    Confusion,
    average_ranks,
    balanced_accuracy,
    bootstrap_ci,
    calibrate,
    confusion,
    f1_failing,
    spearman,
)

__all__ = [
    "CalibrationReport",
    "Confusion",
    "average_ranks",
    "balanced_accuracy",
    "bootstrap_ci",
    "calibrate",
    "confusion",
    "f1_failing",
    "spearman",
]

warnings.warn(
    "ragpulse.judges.calibration is deprecated and will be removed in the next release; "
    "import ragpulse.calibration instead",
    DeprecationWarning,
    stacklevel=2,
)
