"""The test helpers that derive database URLs work for a unix-socket URL as for a TCP one (CI may configure
either through ``RAGPULSE_TEST_PG_ADMIN_URL``)."""

from __future__ import annotations

import pytest

from testsupport import pg_server, pg_url_with

SOCKET = "postgresql://postgres@/db1?host=/var/run/postgresql"


@pytest.mark.parametrize(
    ("url", "server"),
    [
        ("postgresql://postgres@127.0.0.1:5432/db1", ("127.0.0.1", 5432)),
        ("postgresql://u:pw@[::1]:6543/db1?sslmode=disable", ("::1", 6543)),
        ("postgresql://postgres@db.example:5433/db1", ("db.example", 5433)),
        ("postgresql://postgres@db.example/db1", ("db.example", 5432)),
        (SOCKET, "/var/run/postgresql/.s.PGSQL.5432"),
        (
            "postgresql://postgres@/db1?host=/var/run/postgresql&port=5433",
            "/var/run/postgresql/.s.PGSQL.5433",
        ),
        ("postgresql://postgres@%2Fvar%2Frun%2Fpostgresql/db1", "/var/run/postgresql/.s.PGSQL.5432"),
    ],
)
def test_pg_server_is_the_tcp_address_or_the_socket_path(url: str, server: tuple[str, int] | str) -> None:
    assert pg_server(url) == server


def test_pg_url_with_keeps_the_server_unless_told_and_drops_only_the_socket_parameters() -> None:
    assert pg_url_with(SOCKET, user="limited") == "postgresql://limited@/db1?host=/var/run/postgresql"
    assert pg_url_with(SOCKET, tcp=("127.0.0.1", 7000)) == "postgresql://postgres@127.0.0.1:7000/db1"
    tcp = "postgresql://postgres:secret@127.0.0.1:5432/db1?sslmode=disable"
    assert pg_url_with(tcp, user="limited") == "postgresql://limited@127.0.0.1:5432/db1?sslmode=disable"
    assert pg_url_with(tcp, tcp=("127.0.0.1", 7000)) == (
        "postgresql://postgres:secret@127.0.0.1:7000/db1?sslmode=disable"
    )
