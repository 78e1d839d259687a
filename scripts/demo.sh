#!/usr/bin/env bash
# README command 1: install ragpulse and run the main job on the embedded defaults —
# replay the shipped example test set through the offline judges into an embedded PostgreSQL
# (or the server in RAGPULSE_STORE_DATABASE_URL) and print the run report.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/ragpulse replay examples/kestrel_kb.jsonl "$@"
