"""Peak memory of ``ragpulse replay`` on a test set with one huge answer (judge.max_text_chars, text caches).

Writes a JSONL test set of ``--cases`` normal cases (question, 2 contexts, a short answer, keywords) plus one
case whose answer is ``--answer-mb`` MB of a repeated paragraph (``--lang en`` or ``zh``), then runs
``ragpulse replay FILE --json`` with the default offline judges (no judge model) in a child process against a
private database on 127.0.0.1:5432 (dropped afterwards) or ``--database-url``; ``--max-text-chars N`` sets
``judge.max_text_chars`` (e.g. above the answer's length, to judge it). Prints the child's wall time,
CPU time (user + system) and peak RSS (``wait4`` rusage ``ru_maxrss``), the 1-minute load average, and what
each judge made of the huge case. ``--src DIR`` runs another checkout's ``src`` (a before/after comparison)::

    PYTHONPATH=src python bench/long_text.py --answer-mb 10
    PYTHONPATH=src python bench/long_text.py --answer-mb 10 --src /path/to/old/checkout/src
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from replay_scale import _admin, run  # the child-process measurement (wait4 rusage) and admin SQL

TEXTS = {
    "en": (
        "How many days of annual leave do employees get?",
        "The annual leave policy grants employees twenty days of paid leave per calendar year. "
        "Requests must be approved by the line manager at least two weeks in advance. ",
        "Employees get twenty days of paid leave per year. Requests need approval two weeks ahead.",
        ["twenty", "leave"],
    ),
    "zh": (
        "员工每年有多少天年假？",
        "年假政策规定员工每个日历年享有二十天带薪年假。申请须至少提前两周获得直属经理批准。",
        "员工每年享有二十天带薪年假。申请须提前两周获得批准。",
        ["二十天", "年假"],
    ),
}


def write_cases(path: Path, lang: str, cases: int, answer_mb: float) -> None:
    question, paragraph, answer, keywords = TEXTS[lang]
    contexts = [paragraph + "Unused days expire on March 31.", "Sick leave is separate from annual leave."]
    size = int(
        answer_mb * 1e6 / len(paragraph.encode("utf-8")) * len(paragraph)
    )  # characters for that many MB
    huge = (paragraph * (size // len(paragraph) + 1))[:size]
    rows: list[dict[str, Any]] = [
        {"id": f"n{i}", "question": question, "contexts": contexts, "answer": answer, "keywords": keywords}
        for i in range(cases)
    ]
    rows.insert(
        cases // 2,
        {"id": "huge", "question": question, "contexts": contexts, "answer": huge, "keywords": keywords},
    )
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--answer-mb", type=float, default=10.0)
    ap.add_argument("--lang", choices=sorted(TEXTS), default="en")
    ap.add_argument("--cases", type=int, default=5, help="normal cases besides the huge one")
    ap.add_argument("--database-url", default=None)
    ap.add_argument("--src", default=None, help="the src directory to run (default: this checkout's)")
    ap.add_argument(
        "--max-text-chars", type=int, default=None, help="RAGPULSE_JUDGE_MAX_TEXT_CHARS (default: unset)"
    )
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ragpulse-long-text-"))
    path = work / f"long_{args.lang}.jsonl"
    write_cases(path, args.lang, args.cases, args.answer_mb)
    db_name = None
    url = args.database_url
    if url is None:
        db_name = f"ragpulse_bench_{uuid.uuid4().hex[:8]}"
        asyncio.run(_admin(f'CREATE DATABASE "{db_name}"'))
        url = f"postgresql://postgres@127.0.0.1:5432/{db_name}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGPULSE_")}
    env.update(RAGPULSE_STORE_DATABASE_URL=url, RAGPULSE_LOG_LEVEL="WARNING", RAGPULSE_JUDGE_MODEL="")
    env["PYTHONPATH"] = args.src or str(Path(__file__).resolve().parents[1] / "src")
    if args.max_text_chars is not None:
        env["RAGPULSE_JUDGE_MAX_TEXT_CHARS"] = str(args.max_text_chars)
    out = work / "report.json"
    try:
        print(f"file={path.stat().st_size / 1e6:.1f} MB lang={args.lang} src={env['PYTHONPATH']}")
        rc, wall, rss_mb, cpu = run(
            [sys.executable, "-m", "ragpulse", "replay", str(path), "--json"], env, out
        )
        print(
            f"rc={rc} wall={wall:.1f} s cpu={cpu:.1f} s peak RSS={rss_mb:.0f} MB load1={os.getloadavg()[0]:.2f}"
        )
        report = json.loads(out.read_text("utf-8").strip().splitlines()[-1])
        for case in report["cases"]:
            if case["case_id"] == "huge":
                for name, j in sorted(case["judgements"].items()):
                    print(f"  huge {name}: {j['status']} {j['score']} {(j['reason'] or '')[:100]}")
    finally:
        if db_name:
            asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)'))


if __name__ == "__main__":
    main()
