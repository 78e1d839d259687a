"""Which process owns something the store keeps alive (a ``running`` run, an embedded PostgreSQL user).

``OWNER_HOST`` is ``<hostname>/<pid namespace>`` (``/proc/self/ns/pid`` on Linux): two containers with the
same hostname but their own pid namespaces are different hosts, so a pid is only checked where it means the
same process.
"""

from __future__ import annotations

import os
import socket

__all__ = ["OWNER_HOST", "owner_host", "pid_alive"]


def owner_host() -> str:
    """``<hostname>/<pid namespace inode>`` (just the hostname where ``/proc`` has no namespaces)."""
    try:
        ns = os.readlink("/proc/self/ns/pid")  # e.g. "pid:[4026531836]"
    except OSError:
        return socket.gethostname()
    return f"{socket.gethostname()}/{ns}"


#: This process's host identity (see :func:`owner_host`).
OWNER_HOST = owner_host()


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host (``kill(pid, 0)``; another user's process counts)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        return True
    return True
