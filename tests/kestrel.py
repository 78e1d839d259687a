"""Load ``examples/kestrel_kb.jsonl`` as traces (as replay of recorded answers builds them)."""

from __future__ import annotations

import json
from pathlib import Path

from ragpulse.model import Trace

ROOT = Path(__file__).resolve().parents[1]
KESTREL = ROOT / "examples" / "kestrel_kb.jsonl"
CHECKLISTS = ROOT / "config" / "checklists"


def kestrel_traces() -> dict[str, Trace]:
    out: dict[str, Trace] = {}
    for line in KESTREL.read_text("utf-8").splitlines():
        r = json.loads(line)
        out[r["id"]] = Trace(
            trace_id=r["id"],
            app=r.get("app"),
            scenario=r.get("scenario"),
            question=r["question"],
            answer=r["answer"],
            expected_answer=r["expected_answer"],
            keywords=r["keywords"],
            documents=[{"id": d, "content": c} for d, c in zip(r["doc_ids"], r["contexts"], strict=True)],
            attributes={"context_labels": r["context_labels"]},
        )
    return out
