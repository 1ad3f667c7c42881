"""Pre-computing each rank's share of the analysis where it was captured.

With `nsyswrap launch --precompute`, every profiled rank, once its program has ended,
exports its own report(s) to SQLite and computes, on its own node, what `nsyswrap report`
needs of that report alone: the normalized views, the reductions the cross-rank section
reads (every reduction: a one-rank report reads none) and the per-rank results of the
report's single-rank section (default options).
All of it lands in the cache (`$NSYSWRAP_CACHE_DIR`, which must then be on a file system
the analysing node sees at the same path), so `nsyswrap report RUN` only reduces.
"""

from __future__ import annotations

from pathlib import Path

from nsyswrap.errors import NsysWrapError


def precompute(reports: list[Path]) -> None:
    """Normalize `reports` and cache their reductions and per-rank results, in this
    process: the rank's node does its own share."""
    from nsyswrap.engine import planner, sql_objects
    from nsyswrap.engine.opener import Opener
    from nsyswrap.report import ReportOptions, build_report

    with Opener(jobs=1).open(reports) as run:
        run.store_per_report = True
        build_report(run, ReportOptions())
        # every per-report object (the cross-rank section's, the timeline's), default parameters
        wanted = [
            n
            for o in sql_objects.objects().values()
            for n in sql_objects.needs(o.name)
            if sql_objects.get(n).kind == "report"
        ]
        planner.stored_rows(run, [(n, {}) for n in dict.fromkeys(wanted)])


def export_and_precompute(reports: list[Path], nsys: str) -> str | None:
    """In the per-rank wrapper: export the rank's `.nsys-rep` reports and precompute them;
    None when done, else why not (the training's exit code stays what it was)."""
    from nsyswrap.launch.export import export_one
    from nsyswrap.launch.nsys import find_nsys

    try:
        nsys_path, _ = find_nsys(nsys)
        for report in reports:
            if not report.with_suffix(".sqlite").exists() and (
                error := export_one(nsys_path, report)
            ):
                return f"{report}: nsys export failed ({error}); nothing precomputed"
        for report in reports:  # repeated captures of one rank: each alone
            precompute([report.with_suffix(".sqlite")])
    except NsysWrapError as exc:
        return f"precompute: {exc}"
    return None
