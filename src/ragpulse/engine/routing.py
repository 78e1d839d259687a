"""Which judges run for a trace: the first matching ``settings.judge.routes`` entry, else all judges."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ragpulse.config import JudgeRoute
from ragpulse.model import Trace
from ragpulse.protocols import Judge

__all__ = ["Router"]


class Router:
    """Selects judges per app/scenario.

    A route matches when each of its ``app``/``scenario`` is ``None`` or equal to the trace's value; the first
    match wins. Judge names a route lists but the engine was not given are ignored (a route may name judges
    that a ``--judges`` selection left out); a trace matching no route gets every judge. A name no judge
    registry knows (a typo) never gets here: :func:`ragpulse.judges.registry.build_judges` refuses it.
    """

    def __init__(self, judges: Mapping[str, Judge], routes: Sequence[JudgeRoute]) -> None:
        self._judges = dict(judges)
        self._all = tuple(self._judges.values())
        self._routes = tuple(routes)
        self._cache: dict[tuple[str | None, str | None], tuple[Judge, ...]] = {}

    def select(self, trace: Trace) -> tuple[Judge, ...]:
        """Return the judges to run on ``trace``, in the route's (or registration) order."""
        key = (trace.app, trace.scenario)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        chosen = self._all
        for r in self._routes:
            if (r.app is None or r.app == trace.app) and (r.scenario is None or r.scenario == trace.scenario):
                chosen = tuple(self._judges[n] for n in r.judges if n in self._judges)
                break
        if len(self._cache) < 4096:
            self._cache[key] = chosen
        return chosen
