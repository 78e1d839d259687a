from pathlib import Path

from ragpulse.config import load_settings

ROOT = Path(__file__).resolve().parents[1]


def test_example_config_is_valid() -> None:
    s = load_settings(ROOT / "config" / "ragpulse.example.yaml")
    assert s.judge.enabled == ["relevancy", "faithfulness", "keyword"]
    assert s.judge.options["faithfulness"]["mode"] == "claims"
    assert s.engine.queue_size == 1000
    assert s.export.metrics_app_label_limit == 50
    assert s.judge.routes[0].scenario == "order_delay"
    assert "order_delay_answer" in s.judge.routes[0].judges
    assert "reimbursement_answer" in s.judge.routes[1].judges
    assert s.judge.model is None  # offline default


def test_example_test_set_rows_have_required_fields() -> None:
    import json

    rows = [
        json.loads(line) for line in (ROOT / "examples" / "kestrel_kb.jsonl").read_text("utf-8").splitlines()
    ]
    assert len(rows) == 17
    for r in rows:
        assert r["question"]
        assert r["expected_answer"]
        assert r["answer"]
        assert r["keywords"]
        assert len(r["contexts"]) == len(r["doc_ids"]) == len(r["context_labels"])
    assert {r["language"] for r in rows} == {"en", "zh"}


def test_example_config_mentions_every_setting() -> None:
    """Every section and key appears in the example file (set or commented out), secrets excepted."""
    import re

    from ragpulse.config import SECRETS, SECTIONS

    text = (ROOT / "config" / "ragpulse.example.yaml").read_text("utf-8")
    missing = []
    for section, model in SECTIONS.items():
        if not re.search(rf"^#? ?{section}:", text, re.M):
            missing.append(section)
        for field, info in model.model_fields.items():
            key = info.alias or field
            if (section, field) not in SECRETS and not re.search(rf"^\s*#? *{key}:", text, re.M):
                missing.append(f"{section}.{key}")
    assert missing == []
