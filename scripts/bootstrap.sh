#!/usr/bin/env bash
# Creates .venv (Python >= 3.11) and installs ragpulse with its dev extras from this checkout.
# Idempotent: re-installs only when pyproject.toml changed since the last install.
set -euo pipefail
cd "$(dirname "$0")/.."

PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  for cand in python3 python3.13 python3.12 python3.11; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
      PY="$cand"; break
    fi
  done
fi
[ -n "$PY" ] || { echo "ragpulse needs Python >= 3.11" >&2; exit 2; }

if [ ! -x .venv/bin/python ]; then
  echo "bootstrap: creating .venv with $PY" >&2
  "$PY" -m venv .venv
fi
stamp=".venv/.ragpulse-install-$(sha256sum pyproject.toml | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  echo "bootstrap: installing ragpulse[dev] into .venv" >&2
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e ".[dev]"
  rm -f .venv/.ragpulse-install-*
  touch "$stamp"
fi
