"""Cascade measurement (not a test): model calls saved and balanced accuracy of a faithfulness cascade by band.

The shared human-labelled sets (``RAGPULSE_SHARED_DIR``/datasets, default ``shared/`` beside the checkout):
``halueval_qa`` (EN, ``faithful``), ``ares_human`` (EN, ``answer_faithfulness``) and ``uhgeval_zh`` (ZH,
``faithful``). Every case is judged by the real :class:`ragpulse.judges.cascade.CascadeJudge` (first stage:
the offline faithfulness judge; main: the LLM faithfulness judge in ``binary`` mode) against the scripted
OpenAI-compatible server (``ragpulse.testing.openai_server``) answering with a
:class:`~ragpulse.testing.openai_server.LabelOracle`: ``perfect`` (always the human label: an upper bound for
a perfect model) and ``80%`` (right with probability 0.8, seeded per case). Cases are judged one at a time
and the oracle is told which case is current, so it never mistakes one case's text for another's.

Per oracle and configuration (``main only``, ``heuristic only``, each band): model calls (requests the server
received), calls saved against ``main only``, share of cases escalated, and balanced accuracy of ``passed``
against the human label (skipped cases count as a failed verdict, i.e. "not faithful"; their number is
printed). Deterministic: the same arguments give the same table.

Usage::

    python bench/cascade.py                       # all rows of the three sets, markdown table
    python bench/cascade.py --limit 20 --json      # the first 20 rows of each set, JSON
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragpulse.config import Settings
from ragpulse.judges.registry import build_judges, close_judges
from ragpulse.logging import configure_logging
from ragpulse.model import Document, JudgementStatus, Trace
from ragpulse.protocols import Judge
from ragpulse.testing.openai_server import LabelOracle, RecordedRequest, ScriptedOpenAIServer

#: data set → (file under datasets/, label field).
SETS: dict[str, tuple[str, str]] = {
    "halueval_qa": ("halueval_qa/halueval_qa.sample.jsonl", "faithful"),
    "ares_human": ("ares_human/ares_human.sample.jsonl", "answer_faithfulness"),
    "uhgeval_zh": ("uhgeval_zh/uhgeval_zh.sample.jsonl", "faithful"),
}
BANDS: tuple[tuple[float, float], ...] = ((0.2, 0.8), (0.3, 0.7), (0.4, 0.9), (0.5, 0.8), (0.0, 1.0))
ORACLES: dict[str, float] = {"perfect": 1.0, "80%": 0.8}


@dataclass(frozen=True)
class Case:
    """One labelled case: a key (data set and row id), the trace to judge and the human label (True = faithful)."""

    key: str
    trace: Trace
    label: bool


def shared_dir() -> Path:
    """``RAGPULSE_SHARED_DIR``, else ``shared/`` beside the checkout (or one level up, for a worktree)."""
    env = os.environ.get("RAGPULSE_SHARED_DIR")
    if env:
        return Path(env)
    repo = Path(__file__).resolve().parents[1]
    for cand in (repo.parent / "shared", repo.parent.parent / "shared"):
        if cand.is_dir():
            return cand
    return repo.parent / "shared"


def _contexts(raw: Any) -> list[str]:
    if isinstance(raw, list):
        return [str(c) for c in raw]
    if isinstance(raw, str) and raw.startswith("["):
        import ast

        value = ast.literal_eval(raw)
        return [str(c) for c in value] if isinstance(value, list) else [raw]
    return [str(raw)] if raw else []


def load_cases(root: Path, limit: int | None = None) -> list[Case]:
    """The labelled cases of :data:`SETS` under ``root/datasets`` (the first ``limit`` rows of each)."""
    cases: list[Case] = []
    for name, (rel, field) in SETS.items():
        path = root / "datasets" / rel
        rows = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
        for i, row in enumerate(rows[:limit] if limit else rows):
            key = f"{name}:{row.get('id', i)}:{i}"
            docs = tuple(Document(content=c, rank=r) for r, c in enumerate(_contexts(row.get("contexts"))))
            trace = Trace(
                trace_id=f"c{len(cases)}",
                question=row.get("question"),
                answer=row.get("answer"),
                documents=docs,
            )
            cases.append(Case(key, trace, str(row[field]) in ("1", "True", "true")))
    return cases


def balanced_accuracy(pairs: list[tuple[bool, bool]]) -> float | None:
    """Mean of sensitivity and specificity of ``(predicted, truth)`` pairs (``None`` if a class is missing)."""
    pos = [p for p, t in pairs if t]
    neg = [p for p, t in pairs if not t]
    if not pos or not neg:
        return None
    return (sum(pos) / len(pos) + sum(not p for p in neg) / len(neg)) / 2


async def _run(judge: Judge, cases: list[Case], current: list[str]) -> list[tuple[bool, str | None, bool]]:
    """``(passed, stage, skipped)`` per case, judged one at a time."""
    out = []
    for c in cases:
        current[0] = c.key
        j = await judge.judge(c.trace)
        stage = j.flags.model_dump().get("stage")
        out.append((bool(j.passed), stage, j.status is not JudgementStatus.OK))
    return out


async def measure(
    cases: list[Case], bands: tuple[tuple[float, float], ...] = BANDS, seed: int = 7
) -> list[dict[str, Any]]:
    """One row per oracle and configuration (see the module docstring)."""
    labels = {c.key: c.label for c in cases}
    truth = [c.label for c in cases]
    current = [""]
    rows: list[dict[str, Any]] = []
    with ScriptedOpenAIServer() as server:
        for oracle_name, p in ORACLES.items():

            def key_of(_req: RecordedRequest) -> str:
                return current[0]

            server.reset(LabelOracle(labels, key=key_of, p_correct=p, seed=seed))
            configs: list[tuple[str, dict[str, Any] | None]] = [("main only", None), ("heuristic only", {})]
            configs += [
                (f"band [{lo}, {hi}]", {"cascade": {"first": "heuristic", "band": [lo, hi]}})
                for lo, hi in bands
            ]
            main_calls = None
            for label, extra in configs:
                settings = Settings(
                    judge_base_url=server.base_url if extra != {} else None,
                    judge_model="oracle" if extra != {} else None,
                    judge_api_key="sk-bench",
                    judge_max_retries=0,
                    judge_cache_size=0,
                    judge_options={"faithfulness": {"mode": "binary", **(extra or {})}},
                )
                before = server.request_count
                judges = build_judges(settings, ["faithfulness"])
                try:
                    results = await _run(judges["faithfulness"], cases, current)
                finally:
                    await close_judges(judges)
                calls = server.request_count - before
                if main_calls is None:
                    main_calls = calls
                escalated = sum(1 for _, stage, _ in results if stage in ("main", "first_fallback"))
                ba = balanced_accuracy(
                    [(passed, t) for (passed, _, _), t in zip(results, truth, strict=True)]
                )
                rows.append(
                    {
                        "oracle": oracle_name,
                        "config": label,
                        "cases": len(cases),
                        "model_calls": calls,
                        "calls_saved": round(1 - calls / main_calls, 4) if main_calls else None,
                        "escalated": round(escalated / len(cases), 4) if extra else None,
                        "skipped": sum(1 for *_, s in results if s),
                        "balanced_accuracy": None if ba is None else round(ba, 4),
                    }
                )
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    """The rows as the markdown table of ``docs/judges.md``."""
    head = "| oracle | configuration | model calls | calls saved | escalated | balanced accuracy |\n|---|---|---|---|---|---|"
    lines = [head]
    for r in rows:
        saved = "-" if r["calls_saved"] is None else f"{r['calls_saved']:.0%}"
        esc = "-" if r["escalated"] is None else f"{r['escalated']:.0%}"
        ba = "-" if r["balanced_accuracy"] is None else f"{r['balanced_accuracy']:.3f}"
        lines.append(f"| {r['oracle']} | {r['config']} | {r['model_calls']} | {saved} | {esc} | {ba} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--limit", type=int, default=None, help="first N rows of each data set")
    ap.add_argument("--seed", type=int, default=7, help="seed of the 80%% oracle's errors")
    ap.add_argument("--json", action="store_true", help="print JSON rows instead of a markdown table")
    args = ap.parse_args(argv)
    configure_logging("WARNING")
    cases = load_cases(shared_dir(), args.limit)
    rows = asyncio.run(measure(cases, seed=args.seed))
    print(json.dumps(rows, indent=2) if args.json else markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
