"""The UI's flash cookie (POST-redirect-GET): signed, for one page, short-lived, never over the cookie limit."""

from __future__ import annotations

from ragpulse.portal.ui.flash import FLASH_TTL_S, MAX_COOKIE_CHARS, Flash, read_flash, sign_flash

KEY = b"k" * 32


def test_a_flash_reads_back_on_its_page_only() -> None:
    value = sign_flash(KEY, Flash(path="/runs/new", err="no judges", form={"judges": ["a", "b"]}), now=1000.0)
    got = read_flash(KEY, value, "/runs/new", now=1000.0)
    assert got == Flash(path="/runs/new", err="no judges", msg=None, form={"judges": ["a", "b"]}, data={})
    assert read_flash(KEY, value, "/runs", now=1000.0) is None
    assert read_flash(b"x" * 32, value, "/runs/new", now=1000.0) is None  # another key: refused
    assert read_flash(KEY, value, "/runs/new", now=1000.0 + FLASH_TTL_S + 1) is None  # expired


def test_a_changed_flash_is_refused() -> None:
    value = sign_flash(KEY, Flash(path="/p", err="e"), now=0.0)
    body, _, mac = value.rpartition(".")
    forged = sign_flash(b"other-key-00000000000000000000000", Flash(path="/p", err="call +1-555"), now=0.0)
    assert read_flash(KEY, forged.rpartition(".")[0] + "." + mac, "/p", now=0.0) is None
    assert read_flash(KEY, body + "." + "0" * 32, "/p", now=0.0) is None
    assert read_flash(KEY, "not-a-flash", "/p", now=0.0) is None


def test_a_big_flash_keeps_the_error_and_cuts_the_rest() -> None:
    rows = [[i, "question must be a string " * 4] for i in range(400)]
    flash = Flash(path="/t", err="bad import", form={"text": "x" * 10_000}, data={"rows": rows})
    value = sign_flash(KEY, flash, now=0.0)
    assert len(value) <= MAX_COOKIE_CHARS
    got = read_flash(KEY, value, "/t", now=0.0)
    assert got is not None
    assert got.err == "bad import"
    assert got.form == {}  # the typed text did not fit
    assert 0 < len(got.data["rows"]) < 400
    assert got.data["rows_cut"] is True
    assert got.data["rows"][0] == rows[0]
