"""How to open reports: the options every command that reads a run shares.

Light (the run, with DuckDB, loads in `Opener.open`), so a warm report can read these
options without opening anything."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from nsyswrap.storage.reports import DEFAULT_RANK_PATTERN

if TYPE_CHECKING:
    from nsyswrap.engine.dask_engine import DaskEngine
    from nsyswrap.engine.run import Run


@dataclass(frozen=True)
class Opener:
    """How to open reports: the options every command that reads a run shares."""

    rank_pattern: str = DEFAULT_RANK_PATTERN
    jobs: int = 2
    progress: Callable[[int, int], None] | None = None
    allow_unrelated: bool = False  # analyse reports across runs (see Run.allow_unrelated)
    engine: DaskEngine | None = None  # None: local worker processes (see nsyswrap.engine.pool)
    plan: tuple[tuple[str, dict], ...] = ()  # what the caller will ask for (see open_run)
    cache_max: str = ""  # the store's cap (nsyswrap.storage.store.cap_bytes; "": the default)

    def open(self, inputs: list[str | Path]) -> Run:
        from nsyswrap.engine.opening import open_run
        from nsyswrap.storage import store

        store.parse_cap(self.cache_max)  # a bad --cache-max is refused before any work
        run = open_run(
            inputs,
            rank_pattern=self.rank_pattern,
            jobs=self.jobs,
            progress=self.progress,
            engine=self.engine,
            plan=self.plan,
            cache_max=self.cache_max,
            allow_unrelated=self.allow_unrelated,
        )
        return run


DEFAULT_OPENER = Opener()
