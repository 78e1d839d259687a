"""Balanced accuracy of the offline judges on the evaluation sets of this folder (and, when given, the shared
sets): ``python examples/eval/measure.py [--shared ../shared/datasets] [--shapes]``.

The same numbers as ``ragpulse calibrate FILE --judge J --label L --json`` (it calls the same function).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from ragpulse.calibration.calibrate import load_cases, run_calibration
from ragpulse.config import Settings

HERE = Path(__file__).parent
SETS = [
    ("dialogue_faithfulness", "faithfulness", "faithful"),
    ("summary_faithfulness", "faithfulness", "faithful"),
    ("relevancy_forms", "relevancy", "relevant"),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", type=Path)
    ap.add_argument("--shapes", action="store_true", help="per-shape pass rates")
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    settings = Settings()
    runs: list[tuple[str, Path, str, str]] = []
    for name, judge, label in SETS:
        for part in ("tune", "holdout"):
            runs.append((f"{name}.{part}", HERE / f"{name}.{part}.jsonl", judge, label))
    if args.shared:
        s = args.shared
        runs += [
            (
                "ares_human faithfulness",
                s / "ares_human/ares_human.sample.jsonl",
                "faithfulness",
                "answer_faithfulness",
            ),
            (
                "ares_human relevance",
                s / "ares_human/ares_human.sample.jsonl",
                "relevancy",
                "answer_relevance",
            ),
            ("halueval_qa", s / "halueval_qa/halueval_qa.sample.jsonl", "faithfulness", "faithful"),
            (
                "faithfulness_swaps",
                HERE.parent.parent / "tests/judges/data/faithfulness_swaps.jsonl",
                "faithfulness",
                "faithful",
            ),
        ]
    for title, path, judge, label in runs:
        if args.only and args.only not in title:
            continue
        run = run_calibration(settings, path, judge_name=judge, label=label)
        r = run.report
        ci = r.balanced_accuracy_ci or (float("nan"), float("nan"))
        c = r.confusion
        print(
            f"{title:36s} {judge:12s} n={r.n:4d} unscored={r.n_unscored} BA={r.balanced_accuracy:.3f} "
            f"[{ci[0]:.3f}, {ci[1]:.3f}] tp/fp/tn/fn={c.tp}/{c.fp}/{c.tn}/{c.fn} {run.judge_version}"
        )
        if args.shapes and path.parent == HERE:
            rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
            traces, _ = load_cases(path, label)
            import asyncio

            from ragpulse.calibration.calibrate import _judge_all

            _, js = asyncio.run(_judge_all(settings, judge, traces))
            tot: Counter[str] = Counter()
            ok: Counter[str] = Counter()
            for row, j in zip(rows, js, strict=True):
                tot[row["shape"]] += 1
                ok[row["shape"]] += int(bool(j.passed) == bool(row[label]))
            print("    " + ", ".join(f"{k} {ok[k]}/{tot[k]}" for k in sorted(tot)))


if __name__ == "__main__":
    main()
