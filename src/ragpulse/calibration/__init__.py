"""Trust in the judges: agreement with human labels, pass rates corrected for the judge's own error, shadow
judges and their promotion.

- :mod:`~ragpulse.calibration.agreement` — a judge against human labels (balanced accuracy with a bootstrap
  interval, F1 of the failing class, Spearman); :func:`calibrate`.
- :mod:`~ragpulse.calibration.calibrate` — ``ragpulse calibrate``: judge a labelled file and keep the result as a
  calibration profile (:func:`run_calibration`).
- :mod:`~ragpulse.calibration.correction` — Rogan–Gladen corrected pass rates (:func:`corrected_pass_rate`).
- :mod:`~ragpulse.calibration.live` — the corrected pass rates of live traffic, computed by ``serve``.
- :mod:`~ragpulse.calibration.shadow` / :mod:`~ragpulse.calibration.promotion` — a shadow judge version against
  the main one, and what promoting it means.

The names below are the public face of this package; its modules may change without notice.
"""

from ragpulse.calibration.agreement import CalibrationReport, calibrate
from ragpulse.calibration.calibrate import CalibrationRun, run_calibration
from ragpulse.calibration.correction import CorrectedPassRate, corrected_pass_rate

__all__ = [
    "CalibrationReport",
    "CalibrationRun",
    "CorrectedPassRate",
    "calibrate",
    "corrected_pass_rate",
    "run_calibration",
]
