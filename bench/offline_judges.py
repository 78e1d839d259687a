"""CPU time of the offline relevancy + faithfulness judges on labelled rows (issue 29's speed check).

``PYTHONPATH=src python bench/offline_judges.py --shared ../shared/datasets [--traces 10000]`` judges
``--traces`` traces cycled from ``ares_human.sample.jsonl`` (English, ~500-character answers, ~5,400-character
contexts, 200 distinct rows) and as many from ``uhgeval_zh.sample.jsonl`` (Chinese) with the heuristic
relevancy and faithfulness judges, in process, and prints the CPU seconds of each run and the 1-minute load
average. Run it for two checkouts in turn (``PYTHONPATH=<other>/src``) to compare them under the same load.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from ragpulse.config import Settings
from ragpulse.judges.answer.faithfulness import HeuristicFaithfulnessJudge
from ragpulse.judges.answer.relevancy import HeuristicRelevancyJudge
from ragpulse.model import Trace


def _traces(path: Path, n: int) -> list[Trace]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    out: list[Trace] = []
    for i in range(n):
        r = rows[i % len(rows)]
        ctx = r["contexts"]
        docs = [ctx] if isinstance(ctx, str) else list(ctx)
        out.append(Trace(trace_id=str(i), question=r.get("question"), answer=r["answer"], documents=docs))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", type=Path, required=True)
    ap.add_argument("--traces", type=int, default=10_000)
    args = ap.parse_args()
    settings = Settings()
    judges = [HeuristicRelevancyJudge(settings, {}), HeuristicFaithfulnessJudge(settings, {})]
    for name, rel in (
        ("ares_human", "ares_human/ares_human.sample.jsonl"),
        ("uhgeval_zh", "uhgeval_zh/uhgeval_zh.sample.jsonl"),
    ):
        traces = _traces(args.shared / rel, args.traces)
        for t in traces[:50]:  # warm up: jieba's dictionary, regexes
            for j in judges:
                j.evaluate(t)
        start = time.process_time()
        for t in traces:
            for j in judges:
                j.evaluate(t)
        cpu = time.process_time() - start
        print(
            f"{name}: {len(traces)} traces, relevancy + faithfulness, {cpu:.2f} s CPU; load {os.getloadavg()[0]:.2f}"
        )


if __name__ == "__main__":
    main()
