"""The public API: the names each package face exports (docs/dev/architecture.md, "Public API").

Everything a user may import is listed here literally; adding or removing a name fails this test until the list is
changed with it (and, for a removal or rename, a deprecation and a CHANGELOG entry). Every name must also be
importable from its face, so a face cannot promise a name it lost."""

from __future__ import annotations

import importlib

import pytest

FACES: dict[str, set[str]] = {
    "ragpulse": {
        "Backend",
        "Document",
        "Judgement",
        "JudgementFlags",
        "JudgementStatus",
        "Source",
        "Trace",
        "TraceOutcome",
        "TraceResult",
        "__version__",
    },
    "ragpulse.protocols": {
        "AckCallback",
        "CaseSource",
        "DeadLetterSink",
        "Exporter",
        "FinalJudgementLookup",
        "Judge",
        "PendingStore",
        "ResultStore",
        "RunStore",
        "STORE_FAILURE",
        "ShadowReuseLookup",
        "Source",
        "Store",
        "TokenLedger",
        "TraceSink",
        "WriteReport",
        "judge_inline",
        "judge_needs_answer",
        "not_stored_reason",
    },
    "ragpulse.errors": {
        "BadRequest",
        "ConfigError",
        "Conflict",
        "ExportError",
        "IngestError",
        "JudgeError",
        "NotFoundError",
        "PayloadTooLarge",
        "RagpulseError",
        "ServiceError",
        "SourceFailedError",
        "StoreError",
    },
    "ragpulse.config": {
        "ApiSettings",
        "EmbeddingsSettings",
        "EngineSettings",
        "ExportSettings",
        "HttpSettings",
        "JudgeModel",
        "JudgeRoute",
        "JudgeSettings",
        "KafkaSettings",
        "LogSettings",
        "OtlpSettings",
        "RagEndpoint",
        "RagSettings",
        "ReplaySettings",
        "SamplingRuleSettings",
        "Settings",
        "StoreSettings",
        "check_environment",
        "closest_env_var",
        "env_name",
        "load_settings",
        "settings_reference",
        "unknown_env_vars",
    },
    "ragpulse.judges": {
        "CallLog",
        "Decision",
        "ENTRY_POINT_GROUP",
        "JudgeBase",
        "JudgeOptions",
        "JudgeSpec",
        "available_judges",
        "build_judges",
        "compute_version",
        "error",
        "ok",
        "precheck",
        "skipped",
    },
    "ragpulse.testing": {
        "MemoryExporter",
        "MemoryStore",
        "Reply",
        "Rule",
        "ScriptedJudge",
        "ScriptedOpenAIServer",
        "judge_responder",
        "verdict_reply",
    },
    "ragpulse.runs": {
        "CaseResult",
        "GateResult",
        "RunReport",
        "TestSetError",
        "case_to_trace",
        "case_trace_id",
        "compare_runs",
        "evaluate_gate",
        "judge_cases",
        "load_test_set",
        "new_run_id",
        "open_test_set",
        "replay_test_set",
        "run_report",
        "write_junit",
    },
    "ragpulse.calibration": {
        "CalibrationReport",
        "CalibrationRun",
        "CorrectedPassRate",
        "calibrate",
        "corrected_pass_rate",
        "run_calibration",
    },
}


@pytest.mark.parametrize("face", sorted(FACES))
def test_a_face_exports_exactly_its_listed_names(face: str) -> None:
    module = importlib.import_module(face)
    assert set(module.__all__) == FACES[face]
    assert len(module.__all__) == len(set(module.__all__))  # no name listed twice
    missing = sorted(n for n in FACES[face] if not hasattr(module, n))
    assert missing == []


def test_the_judge_author_api_is_the_frame_the_built_in_judges_use() -> None:
    from ragpulse.judges import JudgeBase
    from ragpulse.judges.answer.keyword import KeywordJudge

    assert issubclass(KeywordJudge, JudgeBase)
