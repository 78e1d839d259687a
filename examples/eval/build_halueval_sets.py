"""Build the dialogue (a) and summary (b) faithfulness sets from HaluEval QA knowledge paragraphs.

Usage: python examples/eval/build_halueval_sets.py ../shared/datasets/halueval_qa/qa_one-turn_data.json

Deterministic (``random.Random`` seeded per row). Rows 150-329 of the source give the summary set, rows 330-499
the dialogue set (rows 0-149 are ragpulse's halueval_qa calibration sample and are not used). Each usable
paragraph gives one faithful and one unfaithful item; alternate paragraphs form the tuning part and the
never-tuned part. See SOURCE.md.
"""

from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path

OUT = Path(__file__).parent

_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"“])|(?<=[a-z0-9)\"”])\.(?=[A-Z])")
_PAREN = re.compile(r"\s*\([^()]*\)")
_NAME = re.compile(r"(?<![\w])(?:[A-Z][\w'’-]*)(?:\s+(?:of\s+|de\s+|the\s+)?[A-Z][\w'’-]*)*")
_NOT_NAMES = set(
    "The A An In It He She I They This On At January February March April May June July August September "
    "October November December Monday Sunday".split()
)
_NUM = re.compile(r"(?<![\w.,])\d{1,3}(?:,\d{3})+(?![\w,])|(?<![\w.,])\d+(?![\w,])")
_AUX = re.compile(r"\b(is|was|are|were|has|had|can|will)\b(?! not)")
_NOT = re.compile(r"\b(is|was|are|were|has|had|did|does) not\b|\b(isn't|wasn't|weren't|didn't|doesn't)\b")


def sentences(text: str) -> list[str]:
    out = []
    for s in _SPLIT.split(text.strip()):
        s = s.strip()
        if s and not s.endswith((".", "!", "?")):
            s += "."
        if s:
            out.append(s)
    return out


def compress(s: str) -> str:
    s = _PAREN.sub("", s)
    return re.sub(r"\s+([,.;])", r"\1", re.sub(r"\s{2,}", " ", s)).strip()


def names(s: str, *, initial: bool = False) -> list[str]:
    """Capitalised word groups (not at a sentence start unless ``initial``), months and pronouns left out."""
    out = []
    for sent in sentences(s):
        for m in _NAME.finditer(sent):
            n = m.group(0)
            if (m.start() == 0 and not initial) or n in out or n.split()[0] in _NOT_NAMES:
                continue
            out.append(n)
    return out


def candidate(knowledge: str) -> list[str]:
    return [c for c in (compress(s) for s in sentences(knowledge)) if 8 <= len(c.split()) <= 45]


def negate(s: str) -> str | None:
    m = _NOT.search(s)
    if m:
        return s[: m.start()] + (m.group(1) or m.group(2).replace("n't", "")) + s[m.end() :]
    m = _AUX.search(s)
    if m and m.start() > 0:
        return s[: m.end()] + " not" + s[m.end() :]
    return None


def change_number(s: str, knowledge: str, rng: random.Random) -> str | None:
    nums = list(_NUM.finditer(s))
    if not nums:
        return None
    m = rng.choice(nums)
    value = int(m.group(0).replace(",", ""))
    for _ in range(20):
        if 1000 <= value <= 2100:
            new = value + rng.choice([-9, -7, -5, -3, -2, 2, 3, 4, 6, 8, 11])
        elif value < 20:
            new = value + rng.choice([1, 2, 3, 5])
        else:
            new = value + rng.choice([-1, 1]) * max(1, value // rng.choice([3, 4, 10]))
        text = f"{new:,}" if "," in m.group(0) else str(new)
        if text not in knowledge:
            return s[: m.start()] + text + s[m.end() :]
    return None


def change_entity(s: str, knowledge: str, rng: random.Random) -> str | None:
    mine = names(s)
    others = [n for n in names(knowledge) if n not in s and all(n not in x and x not in n for x in mine)]
    if not mine or not others:
        return None
    a, b = rng.choice(mine), rng.choice(others)
    return s.replace(a, b, 1)


def swap_relation(s: str, rng: random.Random) -> str | None:
    mine = [n for n in names(s) if len(n) > 2]
    pairs = [(a, b) for i, a in enumerate(mine) for b in mine[i + 1 :] if a not in b and b not in a]
    if not pairs:
        return None
    a, b = rng.choice(pairs)
    return s.replace(a, "\0", 1).replace(b, a, 1).replace("\0", b, 1)


def perturb(s: str, knowledge: str, rng: random.Random, order: list[str]) -> tuple[str, str] | None:
    for kind in order:
        out = {
            "negation": lambda: negate(s),
            "number": lambda: change_number(s, knowledge, rng),
            "entity": lambda: change_entity(s, knowledge, rng),
            "relation_swap": lambda: swap_relation(s, rng),
        }[kind]()
        if out and out != s:
            return kind, out
    return None


KINDS = ["negation", "number", "entity", "relation_swap"]


def summary_set(rows: list[dict[str, str]]) -> list[dict[str, object]]:
    items: list[dict[str, object]] = []
    k = 0
    for i, r in enumerate(rows):
        rng = random.Random(f"summary-{i}")
        cands = candidate(r["knowledge"])
        if not cands:
            continue
        kn = r["knowledge"].strip()
        order = KINDS[(k // 2) % 4 :] + KINDS[: (k // 2) % 4]
        good = rng.choice(cands)
        bad = perturb(good, kn, rng, order)
        if bad is None:
            continue
        # the faithful sentence: the source sentence, sometimes cut after its main clause (a summary drops detail)
        faithful = good
        if rng.random() < 0.4 and ", " in good:
            head = good.rsplit(", ", 1)[0]
            if len(head.split()) >= 6:
                faithful = head + "."
        split = "tune" if k % 2 == 0 else "holdout"
        q = "Summarise the passage in one sentence."
        base = {"question": q, "contexts": [kn], "split": split}
        items.append(
            {
                "id": f"summary_{i:03d}_faithful",
                **base,
                "answer": faithful,
                "shape": "faithful",
                "faithful": 1,
            }
        )
        items.append(
            {"id": f"summary_{i:03d}_{bad[0]}", **base, "answer": bad[1], "shape": bad[0], "faithful": 0}
        )
        k += 1
    return items


OPENERS = [
    "Oh yes!",
    "Sure, I know a bit about that.",
    "Ha, good topic!",
    "Oh, I love that!",
    "Interesting choice!",
    "Yes, I have heard of it.",
    "Great question.",
    "Oh nice, that's one of my favourite topics.",
    "",
    "",
]
HEDGES = [
    "I think ",
    "If I remember right, ",
    "I believe ",
    "As far as I know, ",
    "I'm pretty sure ",
    "",
    "",
    "",
]
CLOSERS = [
    "Have you ever looked into it?",
    "What got you interested in it?",
    "I find that fascinating.",
    "I'd love to learn more about it.",
    "Do you know much about it?",
    "Pretty cool, right?",
    "I enjoy reading about things like that.",
    "",
    "",
]
USER = [
    "Do you know anything about {t}?",
    "I was just reading about {t}, pretty interesting stuff.",
    "Tell me something about {t}!",
    "Have you heard of {t}?",
    "What can you tell me about {t}?",
    "My friend keeps talking about {t}. Any idea what that is?",
]
CITIES = ["Lisbon", "Denver", "Osaka", "Glasgow", "Perth", "Montreal", "Bologna", "Tucson", "Bergen", "Cork"]
INVENTED = [
    "{t} also won a Grammy Award in {y}.",
    "It was later sold to a company based in {c} for about {m} million dollars.",
    "{n} actually grew up in {c} before moving away.",
    "{t} was founded in {y} by two brothers.",
    "{n} also wrote a bestselling memoir about it in {y}.",
    "Most of it was filmed in {c}, if I recall.",
]
PERSONAL = [
    "I actually met {n} in {c} back in {y}.",
    "I visited {c} in {y} and saw it with my own eyes.",
    "My uncle worked with {n} for {k} years.",
]


def lower_first(s: str) -> str:
    w = s.split(" ", 1)[0]
    return (
        s[0].lower() + s[1:] if w in ("The", "A", "An", "It", "In", "He", "She", "They", "This", "As") else s
    )


def dialogue_set(rows: list[dict[str, str]]) -> list[dict[str, object]]:
    items: list[dict[str, object]] = []
    k = 0
    for i, r in enumerate(rows):
        rng = random.Random(f"dialogue-{i}")
        kn = r["knowledge"].strip()
        cands = candidate(kn)
        ns = names(kn, initial=True)
        if not cands or not ns:
            continue
        fact = rng.choice(cands)
        topic = next((n for n in names(fact, initial=True) if len(n) > 3), ns[0])
        people = [n for n in ns if " " in n and n != topic] or [topic]
        user = rng.choice(USER).format(t=topic)

        def frame(body: str, rng: random.Random = rng) -> str:
            hedge = rng.choice(HEDGES)
            body = hedge + lower_first(body) if hedge else body
            parts = [rng.choice(OPENERS), body, rng.choice(CLOSERS)]
            return " ".join(p for p in parts if p)

        good = frame(fact)
        if rng.random() < 0.3 and len(cands) > 1:
            other = next(c for c in cands if c != fact)
            good = good.replace(fact, fact + " " + other) if fact in good else good
        kind = ["added_claim", "changed_fact", "personal_experience", "added_claim", "changed_fact"][k % 5]
        y = str(rng.randint(1950, 2015))
        while y in kn:
            y = str(rng.randint(1950, 2015))
        fill = {
            "t": topic,
            "y": y,
            "c": rng.choice([c for c in CITIES if c not in kn]),
            "m": str(rng.randint(2, 90)),
            "n": rng.choice(people),
            "k": str(rng.randint(3, 12)),
        }
        if kind == "changed_fact":
            changed = perturb(fact, kn, rng, ["number", "entity", "relation_swap", "negation"])
            if changed is None:
                kind = "added_claim"
            else:
                bad = frame(changed[1])
        if kind == "added_claim":
            bad = frame(fact + " " + rng.choice(INVENTED).format(**fill))
        elif kind == "personal_experience":
            bad = frame(fact + " " + rng.choice(PERSONAL).format(**fill))
        split = "tune" if k % 2 == 0 else "holdout"
        base = {"question": user, "contexts": [kn], "split": split}
        items.append(
            {"id": f"dialogue_{i:03d}_faithful", **base, "answer": good, "shape": "faithful", "faithful": 1}
        )
        items.append({"id": f"dialogue_{i:03d}_{kind}", **base, "answer": bad, "shape": kind, "faithful": 0})
        k += 1
    return items


def write(name: str, items: list[dict[str, object]]) -> None:
    for split in ("tune", "holdout"):
        path = OUT / f"{name}.{split}.jsonl"
        with path.open("w", encoding="utf-8") as f:
            for it in items:
                if it["split"] == split:
                    f.write(json.dumps(it, ensure_ascii=False) + "\n")
        print(path, sum(1 for it in items if it["split"] == split))


def main() -> None:
    src = Path(sys.argv[1])
    rows = [json.loads(line) for line in src.read_text(encoding="utf-8").splitlines() if line.strip()]
    write("summary_faithfulness", summary_set(rows[150:330]))
    write("dialogue_faithfulness", dialogue_set(rows[330:500]))


if __name__ == "__main__":
    main()
