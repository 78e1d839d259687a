"""Claim-cause attribution cost of the offline faithfulness judge (not a test): CPU per judgement on RGB.

Data: the shared ``rgb_zh`` sample (``RAGPULSE_SHARED_DIR``/datasets, default ``shared/`` beside the checkout;
300 Chinese questions, 5 passages each, 3 labelled relevant). Every row becomes a trace whose answer is the
first sentence of its first relevant passage followed by a made-up sentence, judged by the real
:class:`~ragpulse.judges.answer.faithfulness.HeuristicFaithfulnessJudge` in three variants:

- ``no ground truth``: retrieval = the 2 irrelevant passages, no labels (no attribution: causes ``null``);
- ``nothing missed``: retrieval = all 5 passages, labels parallel to them (the judgement may pass; a failing
  one's claims are ``generation_error`` without a check);
- ``relevant missed``: retrieval = the 2 irrelevant passages, the 5 labelled passages as the labelled pool
  (every judgement fails; the unsupported sentences are checked against the 3 missed relevant passages).

CPU is ``time.process_time()`` over all rows, the best of ``--repeat`` passes, the chunk-token cache cleared
before each pass (cold, as for new traffic). Also printed: failing judgements and the causes counted.

Usage::

    python bench/attribution.py                 # markdown table
    python bench/attribution.py --repeat 5 --json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from ragpulse.config import Settings
from ragpulse.judges.answer.faithfulness import HeuristicFaithfulnessJudge
from ragpulse.judges.text import lexical
from ragpulse.logging import configure_logging
from ragpulse.model import Trace

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cascade import shared_dir  # the benches' one lookup of the shared data sets

MADE_UP = "该报道由火星通讯社于2099年独家发布。"


def traces(variant: str) -> list[Trace]:
    """One trace per RGB row for ``variant`` (see the module docstring)."""
    path = shared_dir() / "datasets" / "rgb_zh" / "rgb_zh.sample.jsonl"
    out: list[Trace] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        labels = [bool(x) for x in row["context_labels"]]
        passages: list[str] = row["contexts"]
        positive = next(c for c, lab in zip(passages, labels, strict=True) if lab)
        answer = lexical.sentences(positive)[0].rstrip("。；;.") + "。" + MADE_UP
        negatives = [c for c, lab in zip(passages, labels, strict=True) if not lab]
        common: dict[str, Any] = {"trace_id": row["id"], "question": row["question"], "answer": answer}
        if variant == "no ground truth":
            out.append(Trace(documents=negatives, **common))
        elif variant == "nothing missed":
            out.append(Trace(documents=passages, context_labels=tuple(labels), **common))
        else:
            out.append(
                Trace(
                    documents=negatives,
                    context_labels=tuple(labels),
                    labelled_contexts=tuple(passages),
                    **common,
                )
            )
    return out


def measure(variant: str, repeat: int) -> dict[str, Any]:
    judge = HeuristicFaithfulnessJudge(Settings())
    batch = traces(variant)
    best = float("inf")
    failing = misses = errors = 0
    for _ in range(repeat):
        lexical.chunk_index.cache_clear()
        started = time.process_time()
        results = [judge.evaluate(t) for t in batch]
        best = min(best, time.process_time() - started)
        failing = sum(1 for j in results if j.passed is False)
        misses = errors = 0
        for j in results:
            a = (j.flags.model_extra or {}).get("attribution")
            if isinstance(a, dict):
                misses += a["retrieval_misses"]
                errors += a["generation_errors"]
    return {
        "variant": variant,
        "traces": len(batch),
        "cpu_ms_per_trace": round(best * 1000 / len(batch), 3),
        "failing": failing,
        "retrieval_misses": misses,
        "generation_errors": errors,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    configure_logging("WARNING")
    load = os.getloadavg()[0]
    rows = [measure(v, args.repeat) for v in ("no ground truth", "nothing missed", "relevant missed")]
    if args.json:
        print(json.dumps({"load_average_1m": load, "rows": rows}, ensure_ascii=False, indent=2))
        return
    print(f"load average (1 min) at start: {load:.2f}; python {sys.version.split()[0]}")
    print("| variant | traces | CPU ms / trace | failing | retrieval misses | generation errors |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['variant']} | {r['traces']} | {r['cpu_ms_per_trace']} | {r['failing']} | "
            f"{r['retrieval_misses']} | {r['generation_errors']} |"
        )


if __name__ == "__main__":
    main()
