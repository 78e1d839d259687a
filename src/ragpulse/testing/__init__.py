"""Helpers shipped for tests and benches (scripted OpenAI-compatible server, in-memory fakes).

Nothing here is imported by the service itself; modules are imported explicitly, e.g.
``from ragpulse.testing.openai_server import ScriptedOpenAIServer``.
"""
