"""A slow client for the listener tests: opens ``N`` connections to ``host:port`` and sends each a request
without the blank line that ends its headers, then watches them. Run as a script (its own process, its own
file-descriptor limit)::

    python tests/portal/slow_client.py 127.0.0.1 4318 10000 20

Prints one JSON line when every connection was attempted — ``{"attempted": N, "opened": n, "open": k}`` — and
then, every 0.5 s until ``hold_s`` seconds have passed, ``{"t": seconds since then, "open": k}``: how many of its
connections the server has not closed yet.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

HALF_REQUEST = b"GET /readyz HTTP/1.1\r\nHost: x\r\nX-Slow: "


_WATCHERS: set[asyncio.Task[None]] = set()  # referenced until done (the loop keeps only weak references)


async def _one(host: str, port: int, alive: set[int], idx: int, sem: asyncio.Semaphore) -> bool:
    async with sem:
        try:
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(HALF_REQUEST)
            await writer.drain()
        except OSError:
            return False
    alive.add(idx)

    async def watch() -> None:
        try:
            while await reader.read(4096):
                pass
        except OSError:
            pass
        alive.discard(idx)
        writer.close()

    task = asyncio.get_running_loop().create_task(watch())
    _WATCHERS.add(task)
    task.add_done_callback(_WATCHERS.discard)
    return True


async def main(host: str, port: int, n: int, hold_s: float) -> None:
    alive: set[int] = set()
    sem = asyncio.Semaphore(500)
    results = await asyncio.gather(*(_one(host, port, alive, i, sem) for i in range(n)))
    print(json.dumps({"attempted": n, "opened": sum(results), "open": len(alive)}), flush=True)
    start = time.monotonic()
    while time.monotonic() - start < hold_s:
        await asyncio.sleep(0.5)
        print(json.dumps({"t": round(time.monotonic() - start, 2), "open": len(alive)}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])))
