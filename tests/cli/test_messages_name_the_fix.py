"""Issue 27 item 6: an error message names the setting that fixes it (real sockets, real PostgreSQL, the real
``ragpulse`` CLI in a subprocess).

- a listener whose port is taken says so ("Address already in use") and names the environment variable that
  moves it; the gRPC receiver no longer hides the cause behind a ``GRPC_VERBOSITY`` hint;
- a malformed database URL is a configuration error at settings load (exit 2, no connect attempt);
- an unreachable database names the database URL setting (and never echoes the password).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from ragpulse.config import env_name
from testsupport import free_port


def _ragpulse(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("RAGPULSE_", "OTEL_", "OPENAI_"))}
    return subprocess.run(
        [sys.executable, "-m", "ragpulse", *args],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def _error_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
    assert lines, proc.stderr[-2000:]
    return lines[-1]


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port another process (this one) listens on."""
    with socket.create_server(("127.0.0.1", 0)) as sock:
        yield int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("section", "key", "what"),
    [
        ("http", "address", "HTTP"),
        ("otlp", "grpc_address", "OTLP/gRPC"),
        ("otlp", "http_address", "OTLP/HTTP"),
        ("api", "address", "API"),
    ],
)
def test_a_port_in_use_names_the_setting_that_moves_it(
    pg_url: str, taken_port: int, section: str, key: str, what: str
) -> None:
    env = {
        env_name("store", "database_url"): pg_url,
        env_name("http", "address"): "127.0.0.1:0",
        env_name("otlp", "grpc_address"): "",
        env_name("otlp", "http_address"): "",
        env_name("api", "address"): "",
        env_name("judge", "enabled"): "keyword",
        env_name(section, key): f"127.0.0.1:{taken_port}",
    }
    if section == "api":
        env[env_name("api", "token")] = "t" * 32
    proc = _ragpulse(["serve"], env)
    line = _error_line(proc)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"cannot listen for {what} on 127.0.0.1:{taken_port}: Address already in use" in line
    assert f"set {env_name(section, key)} to another host:port" in line
    assert "GRPC_VERBOSITY" not in line


@pytest.mark.integration  # slow check (a ragpulse subprocess per case, ~1.1 s CPU each): the integration lane, docs/dev/testing.md
@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("postgresql://postgres:pw@127.0.0.1:99999/x", "port '99999'"),
        ("postgresql://postgres:pw@127.0.0.1:abc/x", "port 'abc'"),
        ("mysql://postgres@127.0.0.1/x", "scheme postgresql or postgres"),
        ("127.0.0.1:5432/x", "scheme postgresql or postgres"),
    ],
)
def test_a_malformed_database_url_is_a_configuration_error(url: str, why: str) -> None:
    proc = _ragpulse(["db", "info"], {env_name("store", "database_url"): url})
    line = _error_line(proc)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert line.startswith("error: invalid configuration: store.database_url")
    assert env_name("store", "database_url") in line
    assert why in line
    assert "connect" not in line  # rejected at settings load, before any connect attempt
    assert "pw" not in line


@pytest.mark.integration  # slow check (a ragpulse subprocess, ~1.1 s CPU): the integration lane, docs/dev/testing.md
def test_an_unreachable_database_names_the_database_url_setting() -> None:
    port = free_port()  # nothing listens there
    proc = _ragpulse(
        ["db", "info"], {env_name("store", "database_url"): f"postgresql://u:s3cret@127.0.0.1:{port}/x"}
    )
    line = _error_line(proc)
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert f"no PostgreSQL answers at 127.0.0.1:{port}" in line
    assert env_name("store", "database_url") in line
    assert "s3cret" not in proc.stderr
