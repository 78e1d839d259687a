#!/usr/bin/env bash
# README command 2: install everything the tests need and run them.
#   - .venv with ragpulse[dev] (scripts/bootstrap.sh)
#   - PostgreSQL on 127.0.0.1:5432 (started if down; installed from Debian if absent and we are root)
#   - promtool (Debian package `prometheus`) for the alert-rule tests
#   - Chromium and CJK fonts (Debian packages `chromium`, `fonts-noto-cjk`) for the portal's browser tests
#     (tests/web, Playwright for Python from the dev extras drives /usr/bin/chromium; Playwright's own browser
#     download is not used)
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh

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
if ! command -v promtool >/dev/null 2>&1; then
  echo "test.sh: installing promtool (Debian package prometheus)" >&2
  apt_install prometheus || echo "test.sh: could not install prometheus; promtool tests will be skipped" >&2
fi

if [ ! -x /usr/bin/chromium ] || ! fc-list 2>/dev/null | grep -qi "Noto Sans CJK"; then
  echo "test.sh: installing chromium and fonts-noto-cjk (browser tests)" >&2
  apt_install chromium fonts-noto-cjk || echo "test.sh: could not install chromium; the browser tests will fail" >&2
fi

set +e
.venv/bin/python -m pytest -q "$@"
rc=$?
set -e
if [ "$rc" = 5 ]; then
  echo "test.sh: pytest collected no tests (exit 5)" >&2
  exit 0
fi
exit "$rc"
