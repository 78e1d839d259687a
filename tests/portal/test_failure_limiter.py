"""The failed-attempt limit of the portal (:class:`~ragpulse.portal.auth.FailureLimiter`) over a clock the test
moves: 10 failures per address per 60 s, the window sliding, addresses apart, the table bounded."""

from __future__ import annotations

import pytest
from starlette.exceptions import HTTPException

from ragpulse.portal.auth import FailureLimiter


def test_the_limit_slides_with_the_window_and_keeps_addresses_apart() -> None:
    now = [1000.0]
    lim = FailureLimiter()
    lim._clock = lambda: now[0]  # the test's clock
    for _ in range(10):
        assert lim.retry_after("10.0.0.1") is None
        lim.failed("10.0.0.1", "login")
        now[0] += 1.0  # failures at 1000 … 1009
    assert lim.retry_after("10.0.0.1") == 51  # the first failure leaves the window at 1060; now 1010
    assert lim.retry_after("10.0.0.2") is None
    with pytest.raises(HTTPException) as e:
        lim.check("10.0.0.1")
    assert e.value.status_code == 429
    assert e.value.headers == {"Retry-After": "51"}
    now[0] = 1060.0  # the first failure is out: one more try
    assert lim.retry_after("10.0.0.1") is None
    lim.failed("10.0.0.1", "bearer")
    assert lim.retry_after("10.0.0.1") == 2  # the second failure (1001) leaves at 1061
    now[0] = 1200.0
    assert lim.retry_after("10.0.0.1") is None
    assert "10.0.0.1" not in lim._failures  # forgotten once its window is empty


def test_at_most_max_clients_addresses_are_kept() -> None:
    lim = FailureLimiter(max_clients=3)
    for n in range(5):
        lim.failed(f"10.0.0.{n}", "login")
    assert list(lim._failures) == ["10.0.0.2", "10.0.0.3", "10.0.0.4"]
