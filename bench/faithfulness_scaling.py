"""CPU cost of the offline faithfulness judge by text length (issue 25 item 9): one trace whose answer and single
retrieved context are the same ``N``-character text (English with sentences, or Chinese without sentence
punctuation — one huge sentence), judged by :class:`HeuristicFaithfulnessJudge` in this process. Prints the
seconds per judgement and per 1,000 characters for each size, with ``nproc`` and the load average::

    PYTHONPATH=src python bench/faithfulness_scaling.py --sizes 1000,10000,100000
"""

from __future__ import annotations

import argparse
import os
import time

from ragpulse.config import Settings
from ragpulse.judges.answer.faithfulness import HeuristicFaithfulnessJudge
from ragpulse.model import Document, Trace

EN = (
    "The annual leave policy grants employees twenty days of paid leave per calendar year. "
    "Requests must be approved by Mira Osei at least 14 days in advance. "
    "Unused days expire on March 31 and cannot be carried over to 2027. "
)
ZH = "年假政策规定员工每个日历年享有二十天带薪年假申请须至少提前两周获得直属经理王小明批准未使用的年假在三月三十一日失效不能结转到下一年度病假与年假分开计算"


def text(lang: str, n: int) -> str:
    base = EN if lang == "en" else ZH
    return (base * (n // len(base) + 1))[:n]


def once(lang: str, n: int) -> tuple[float, str]:
    body = text(lang, n)
    judge = HeuristicFaithfulnessJudge(Settings(judge={"max_text_chars": 10**7}), {})
    trace = Trace(
        trace_id=f"bench-{lang}-{n}",
        question="年假有多少天？" if lang == "zh" else "How many days of leave?",
        documents=(Document(id="d1", content=body, rank=0),),
        answer=body,
    )
    started = time.process_time()
    j = judge.evaluate(trace)
    return time.process_time() - started, f"{j.status.value} {j.score}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--sizes", default="1000,5000,10000,20000,50000,100000")
    p.add_argument("--langs", default="en,zh")
    a = p.parse_args()
    print(f"nproc={os.cpu_count()} load={os.getloadavg()[0]:.1f}")
    for lang in a.langs.split(","):
        once(lang, 200)  # warm-up: jieba's dictionary, regexes
    print("lang  chars      cpu_s   s_per_1k_chars  judgement")
    for lang in a.langs.split(","):
        for n in (int(s) for s in a.sizes.split(",")):
            s, out = once(lang, n)
            print(f"{lang:4s}  {n:7d}  {s:8.3f}  {s / (n / 1000):8.4f}        {out}")


if __name__ == "__main__":
    main()
