"""Judges of the retrieval: context precision, context recall, context relevance (labels, LLM, heuristic)."""
