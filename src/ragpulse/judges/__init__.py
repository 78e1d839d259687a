"""Judges: feedback functions that score one RAG trace each (relevancy, faithfulness, keyword, …).

This package depends only on :mod:`ragpulse.model`, :mod:`ragpulse.protocols`, :mod:`ragpulse.config`
and :mod:`ragpulse.errors`; never on the engine, store, export or ingest layers.
"""
