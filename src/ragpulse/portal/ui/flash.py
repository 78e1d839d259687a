"""POST-redirect-GET for the UI's forms: what a form post has to tell the page it redirects to.

Every UI form post answers with a redirect (303) to a page (a ``GET``), so reloading the page or switching its
language never re-posts and never lands on a POST-only address (405). What that page must show — the error
text, a notice, the values the user typed (so a form that failed keeps them), an import's result — travels in
a short-lived signed cookie, the *flash*:

- value ``base64url(JSON) "." HMAC-SHA256(portal key, "flash" 0x1f JSON)`` (hex, 32 characters), the portal
  key being the one of the CSRF tokens (:class:`~ragpulse.portal.auth.Access`), so no other site or cookie
  tosser can make the portal show its text;
- JSON ``{"path": "/page", "exp": epoch seconds, "err": str|null, "msg": str|null, "form": {name: str | [str]},
  "data": {...}}``: shown once, only on ``path``, within :data:`FLASH_TTL_S`; deleted when shown;
- at most :data:`MAX_COOKIE_CHARS`: form values are dropped first, then ``data``'s lists are cut, so the error
  itself always arrives.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "FLASH_COOKIE",
    "FLASH_TTL_S",
    "MAX_COOKIE_CHARS",
    "Flash",
    "form_values",
    "read_flash",
    "sign_flash",
]

FLASH_COOKIE = "ragpulse_flash"
#: Seconds a flash waits for its page (a redirect is followed at once; a minute covers a slow link).
FLASH_TTL_S = 60
#: Longest flash cookie value, characters (browsers keep cookies up to 4096 bytes with name and attributes).
MAX_COOKIE_CHARS = 3600


@dataclass
class Flash:
    """What a redirected-to page shows once.

    Attributes:
        path: the page (URL path) it is for.
        err: an error text (already in the user's words: a service error's message).
        msg: a notice: a catalogue key of :mod:`ragpulse.portal.ui.i18n`, formatted with ``data``.
        form: the posted form values to put back, by field name (a list for a multi-valued field).
        data: anything else the page shows (an import's result, ``msg``'s format arguments).
    """

    path: str
    err: str | None = None
    msg: str | None = None
    form: dict[str, str | list[str]] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)


def form_values(
    form: Any, skip: tuple[str, ...] = ("csrf_token", "file", "token")
) -> dict[str, str | list[str]]:
    """The text fields of a posted form (a Starlette ``FormData``): one string per field, a list for a field
    posted more than once (checkboxes); never the CSRF token, a token or an uploaded file."""
    out: dict[str, str | list[str]] = {}
    for key, value in form.multi_items():
        if key in skip or not isinstance(value, str):
            continue
        prev = out.get(key)
        if prev is None:
            out[key] = value
        elif isinstance(prev, list):
            prev.append(value)
        else:
            out[key] = [prev, value]
    return out


def _mac(key: bytes, payload: bytes) -> str:
    return hmac.new(key, b"flash\x1f" + payload, hashlib.sha256).hexdigest()[:32]


def _encode(key: bytes, doc: Mapping[str, Any]) -> str:
    payload = json.dumps(doc, separators=(",", ":"), ensure_ascii=True).encode()
    return base64.urlsafe_b64encode(payload).decode().rstrip("=") + "." + _mac(key, payload)


def sign_flash(key: bytes, flash: Flash, now: float | None = None) -> str:
    """The cookie value of ``flash`` (module docstring), at most :data:`MAX_COOKIE_CHARS` characters."""
    doc: dict[str, Any] = {
        "path": flash.path,
        "exp": int((time.time() if now is None else now) + FLASH_TTL_S),
        "err": flash.err[:1000] if flash.err else None,
        "msg": flash.msg,
        "form": flash.form,
        "data": flash.data,
    }
    value = _encode(key, doc)
    if len(value) > MAX_COOKIE_CHARS:
        doc["form"] = {}
        value = _encode(key, doc)
    data = dict(flash.data)
    while len(value) > MAX_COOKIE_CHARS:
        cut = [k for k, v in data.items() if isinstance(v, list) and v]
        if not cut:
            doc["data"] = {}
            return _encode(key, doc)
        for k in cut:
            data[k] = data[k][: len(data[k]) // 2]
            data[f"{k}_cut"] = True
        doc["data"] = data
        value = _encode(key, doc)
    return value


def read_flash(key: bytes, value: str | None, path: str, now: float | None = None) -> Flash | None:
    """The flash of cookie ``value`` when its signature holds, it has not expired and it is for ``path``."""
    if not value or "." not in value:
        return None
    body, _, mac = value.rpartition(".")
    try:
        payload = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except ValueError:
        return None
    if not hmac.compare_digest(mac.encode(), _mac(key, payload).encode()):
        return None
    try:
        doc = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("path") != path:
        return None
    if not isinstance(doc.get("exp"), int) or doc["exp"] < (time.time() if now is None else now):
        return None
    form: dict[str, str | list[str]] = doc["form"] if isinstance(doc.get("form"), dict) else {}
    data: dict[str, Any] = doc["data"] if isinstance(doc.get("data"), dict) else {}
    err = doc.get("err") if isinstance(doc.get("err"), str) else None
    msg = doc.get("msg") if isinstance(doc.get("msg"), str) else None
    return Flash(path=path, err=err, msg=msg, form=form, data=data)
