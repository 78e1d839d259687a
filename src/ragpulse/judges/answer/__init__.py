"""Judges of the answer: relevancy, faithfulness, keyword overlap, answer correctness (LLM and heuristic)."""
