#!/usr/bin/env bash
# The CI lint step (run by scripts/test.sh before the tests; run it yourself before landing):
#   ruff check and ruff format --check (src, tests, bench), mypy --strict (src, tests and bench), import-linter contracts.
# Every check runs; the script fails (exit 1) on any finding. Tools come from .venv (scripts/bootstrap.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
bin=.venv/bin
[ -x "$bin/ruff" ] || bin="$(dirname "$(command -v ruff)")"

failed=()
check() {
  echo "lint: $*" >&2
  "$@" || failed+=("$1")
}
check "$bin/ruff" check src tests bench
check "$bin/ruff" format --check src tests bench
check "$bin/mypy" --strict src tests bench
check "$bin/lint-imports"

if [ "${#failed[@]}" -gt 0 ]; then
  echo "lint: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "lint: all checks passed" >&2
