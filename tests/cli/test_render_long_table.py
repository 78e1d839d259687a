"""``print_long_table``: a table rendered a chunk of rows at a time prints exactly what one rich table of every
row prints (column widths, wrapping, borders, colours), at any console width."""

from __future__ import annotations

import io
import random
from collections.abc import Sequence

import pytest
from rich.console import Console
from rich.table import Table

from ragpulse.cli._render import print_long_table

HEADERS = ("case", "reason in run-b")


def _rows(seed: int, n: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    words = ["faithfulness:", "0.12", "unsupported", "claim", "检索遗漏", "[bold]x[/bold]", "—", "a" * 30, ""]
    rows = []
    for i in range(n):
        case = f"c{i}" + "-x" * rng.randrange(12)
        reason = " ".join(rng.choice(words) for _ in range(rng.randrange(0, 14)))
        rows.append((case, reason))
    return rows


def _console(width: int, color: bool) -> Console:
    return Console(
        file=io.StringIO(),
        width=width,
        highlight=False,
        force_terminal=color,
        color_system="truecolor" if color else None,
        legacy_windows=False,
    )


def _out(c: Console) -> str:
    f = c.file
    assert isinstance(f, io.StringIO)
    return f.getvalue()


@pytest.mark.integration  # slow check (~4 s CPU): the integration lane, docs/dev/testing.md
def test_a_table_printed_in_chunks_is_the_table_printed_at_once() -> None:
    for seed, n in ((1, 9), (2, 40), (3, 23)):
        rows = _rows(seed, n)
        for width in (200, 70, 30, 12):
            for color in (False, True):
                whole = _console(width, color)
                t = Table(*HEADERS)
                for row in rows:
                    t.add_row(*row)
                whole.print(t)
                for chunk in (1, 2, 5, n - 1, n, 500):
                    c = _console(width, color)

                    def again(rows: list[tuple[str, str]] = rows) -> list[Sequence[str]]:
                        return list(rows)

                    print_long_table(c, HEADERS, again, chunk=chunk)
                    assert _out(c) == _out(whole), (seed, width, color, chunk)
