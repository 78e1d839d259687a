"""Helpers shipped for tests and benches: a scripted OpenAI-compatible judge-model server on loopback
(:class:`ScriptedOpenAIServer`; the real ``openai`` client talks to it) and in-memory fakes of the store, a judge
and an exporter. Nothing here is imported by the service itself.

The names below are the public face of this package; its modules may change without notice.
"""

from ragpulse.testing.fakes import MemoryExporter, MemoryStore, ScriptedJudge
from ragpulse.testing.openai_server import Reply, Rule, ScriptedOpenAIServer, judge_responder, verdict_reply

__all__ = [
    "MemoryExporter",
    "MemoryStore",
    "Reply",
    "Rule",
    "ScriptedJudge",
    "ScriptedOpenAIServer",
    "judge_responder",
    "verdict_reply",
]
