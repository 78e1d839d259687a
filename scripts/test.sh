#!/usr/bin/env bash
# README command 2: install everything the tests need, lint, and run them.
#   - .venv with ragpulse[dev] (scripts/bootstrap.sh)
#   - the lint step (scripts/lint.sh: ruff, ruff format, mypy --strict src tests, import contracts); any
#     finding fails the run, after the tests have run all the same
#   - PostgreSQL on 127.0.0.1:5432 (started if down; installed from Debian if absent and we are root)
#   - promtool and prometheus (Debian package `prometheus`) for the alert-rule and end-to-end metric tests
#   - Chromium and CJK fonts (Debian packages `chromium`, `fonts-noto-cjk`) for the portal's browser tests
#     (tests/web, Playwright for Python from the dev extras drives /usr/bin/chromium; Playwright's own browser
#     download is not used)
#   - the tests, in two lanes that together are the whole suite, each test once (docs/dev/testing.md):
#       1. the fast lane (-m "not integration") with RAGPULSE_ENGINE_SAMPLING_RATE=0 and
#          OTEL_EXPORTER_OTLP_PROTOCOL=bogus exported, proving that no test depends on the shell's settings;
#       2. the integration lane (-m integration): PostgreSQL, Kafka (tansu), Prometheus/promtool, browser, and
#          the slow checks.
#     Both lanes always run; a summary names each step's result and time and ends with the counts of both lanes
#     ("total: N passed, N failed, N skipped"; errors count as failed). The exit code is 1 if lint or either
#     lane failed, else 0.
# Extra arguments go to one pytest run instead of the two lanes (e.g. `scripts/test.sh tests/engine`).
# pytest's exit code 5 ("no tests collected") counts as success.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
lint_rc=0
lint_start=$SECONDS
bash scripts/lint.sh || lint_rc=$?
lint_s=$((SECONDS - lint_start))

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else return 1; fi; }
apt_updated=0
apt_install() {
  [ "$apt_updated" = 1 ] || { as_root apt-get update -qq >/dev/null; apt_updated=1; }
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

pg_up() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }
if ! command -v pg_isready >/dev/null 2>&1; then
  echo "test.sh: installing PostgreSQL" >&2
  apt_install postgresql
fi
if ! pg_up; then
  echo "test.sh: starting PostgreSQL" >&2
  for v in $(ls /etc/postgresql 2>/dev/null); do
    as_root pg_ctlcluster --skip-systemctl-redirect "$v" main start || true
  done
  for _ in $(seq 1 30); do pg_up && break; sleep 1; done
  pg_up || { echo "test.sh: PostgreSQL is not reachable on 127.0.0.1:5432" >&2; exit 1; }
fi
if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1; then
  echo "test.sh: installing promtool and prometheus (Debian package prometheus)" >&2
  apt_install prometheus || echo "test.sh: could not install prometheus; promtool/prometheus tests will be skipped" >&2
fi

if [ ! -x /usr/bin/chromium ] || ! fc-list 2>/dev/null | grep -qi "Noto Sans CJK"; then
  echo "test.sh: installing chromium and fonts-noto-cjk (browser tests)" >&2
  apt_install chromium fonts-noto-cjk || echo "test.sh: could not install chromium; the browser tests will fail" >&2
fi

# pytest, with exit code 5 ("no tests collected") mapped to 0. With a log file as first argument, the output is
# also written there (for the summary).
run_pytest() {
  local rc=0 log=/dev/null
  if [ "${1:-}" = "--log" ]; then log=$2; shift 2; fi
  .venv/bin/python -m pytest -q "$@" 2>&1 | tee "$log" || rc=$?
  if [ "$rc" = 5 ]; then
    echo "test.sh: pytest collected no tests (exit 5)" >&2
    rc=0
  fi
  return "$rc"
}

if [ "$#" -gt 0 ]; then
  rc=0
  run_pytest "$@" || rc=$?
  [ "$lint_rc" = 0 ] || { echo "test.sh: lint FAILED (see above)" >&2; [ "$rc" != 0 ] || rc=1; }
  exit "$rc"
fi

# pytest's closing line in log $1 ("3 failed, 1250 passed, 293 deselected in 80.1s"), empty if there is none.
closing() { grep -E '^=*\s*[0-9]+ [a-z]+.* in [0-9.]+s' "$1" | tail -n 1 | sed -E 's/^=+ //; s/ =+$//' || true; }
# The count of outcome $2 ("passed", "failed", "error", "skipped") in that line of log $1 (0 when absent).
count() {
  local line
  line=$(closing "$1")
  if [[ $line =~ ([0-9]+)\ $2 ]]; then echo "${BASH_REMATCH[1]}"; else echo 0; fi
}

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
fast_rc=0
start=$SECONDS
echo "test.sh: fast lane (-m 'not integration') with RAGPULSE_ENGINE_SAMPLING_RATE=0 OTEL_EXPORTER_OTLP_PROTOCOL=bogus" >&2
RAGPULSE_ENGINE_SAMPLING_RATE=0 OTEL_EXPORTER_OTLP_PROTOCOL=bogus run_pytest --log "$logs/fast" -m "not integration" || fast_rc=$?
fast_s=$((SECONDS - start))
echo "test.sh: fast lane took ${fast_s} s; integration lane (-m integration)" >&2
integration_rc=0
start=$SECONDS
run_pytest --log "$logs/integration" -m integration || integration_rc=$?
integration_s=$((SECONDS - start))

verdict() { if [ "$1" = 0 ]; then echo ok; else echo "FAILED (exit $1)"; fi; }
echo
echo "test.sh summary"
echo "  lint:             $(verdict "$lint_rc"), ${lint_s} s"
for lane in fast integration; do
  rc_var=${lane}_rc s_var=${lane}_s
  line=$(closing "$logs/$lane")
  printf '  %-17s %s, %s s: %s\n' "$lane lane:" "$(verdict "${!rc_var}")" "${!s_var}" "${line:-no pytest summary line}"
done
passed=$(( $(count "$logs/fast" passed) + $(count "$logs/integration" passed) ))
failed=$(( $(count "$logs/fast" failed) + $(count "$logs/integration" failed) + $(count "$logs/fast" error) + $(count "$logs/integration" error) ))
skipped=$(( $(count "$logs/fast" skipped) + $(count "$logs/integration" skipped) ))
echo "total: $passed passed, $failed failed, $skipped skipped"
if [ "$lint_rc" != 0 ] || [ "$fast_rc" != 0 ] || [ "$integration_rc" != 0 ]; then
  exit 1
fi
