"""Deterministic checklist rules: contains / regex / link to an allowed domain / length bound.

Each rule returns ``(passed, reason)`` for an answer text; no model call, no I/O.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from ragpulse.judges.checklist.spec import ContainsRule, LengthRule, LinkRule, RegexRule

__all__ = ["check_rule", "find_links"]

# http(s) URLs, and bare hosts with a path such as ``help.example.com/orders``; stops at whitespace, quotes,
# brackets and CJK punctuation.
_URL_RE = re.compile(r"""https?://[^\s<>"'()\[\]{}，。；！？、）（【】]+""", re.IGNORECASE)


def find_links(text: str) -> list[str]:
    """Host names (lower-case) of the http(s) links in ``text``, in order of appearance."""
    hosts: list[str] = []
    for m in _URL_RE.finditer(text):
        host = (urlsplit(m.group(0).rstrip(".,;:!?")).hostname or "").lower()
        if host:
            hosts.append(host)
    return hosts


def _allowed(host: str, domains: tuple[str, ...]) -> bool:
    return any(host == d or host.endswith("." + d) for d in domains)


def _contains(rule: ContainsRule, answer: str) -> tuple[bool, str]:
    a = answer.casefold()
    if rule.any and not any(p.casefold() in a for p in rule.any):
        return False, f"none of {list(rule.any)} found"
    missing = [p for p in rule.all if p.casefold() not in a]
    if missing:
        return False, f"missing {missing}"
    present = [p for p in rule.none if p.casefold() in a]
    if present:
        return False, f"forbidden {present} found"
    return True, "phrases as required"


def _regex(rule: RegexRule, answer: str) -> tuple[bool, str]:
    m = re.search(rule.pattern, answer, re.IGNORECASE if rule.ignore_case else 0)
    if rule.match:
        return (True, f"matched {m.group(0)!r}") if m else (False, f"no match for /{rule.pattern}/")
    return (False, f"forbidden match {m.group(0)!r}") if m else (True, f"no match for /{rule.pattern}/")


def _link(rule: LinkRule, answer: str) -> tuple[bool, str]:
    hosts = find_links(answer)
    good = [h for h in hosts if _allowed(h, rule.domains)]
    bad = [h for h in hosts if not _allowed(h, rule.domains)]
    if not good:
        return False, f"no link to {list(rule.domains)}" + (f" (links to {bad})" if bad else "")
    if rule.only_allowed and bad:
        return False, f"links to domains not allowed: {bad}"
    return True, f"links to {good[0]}"


def _length(rule: LengthRule, answer: str) -> tuple[bool, str]:
    n = len(answer.strip())
    if rule.min_chars is not None and n < rule.min_chars:
        return False, f"{n} chars < {rule.min_chars}"
    if rule.max_chars is not None and n > rule.max_chars:
        return False, f"{n} chars > {rule.max_chars}"
    return True, f"{n} chars within bounds"


def check_rule(rule: ContainsRule | RegexRule | LinkRule | LengthRule, answer: str) -> tuple[bool, str]:
    """Apply one rule to ``answer``; returns ``(passed, short reason)``."""
    if isinstance(rule, ContainsRule):
        return _contains(rule, answer)
    if isinstance(rule, RegexRule):
        return _regex(rule, answer)
    if isinstance(rule, LinkRule):
        return _link(rule, answer)
    return _length(rule, answer)
