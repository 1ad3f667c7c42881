"""`python -m bench`: generate (or reuse) the runs, measure, print and write bench/RESULTS.md."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import datetime, timezone

from bench import dataset, results, suite

DEFAULT_BUDGET_S = 5400  # the whole command, once the data exists (generating it: ~40 min)
PARTS = ("main", "ranks", "whatif", "scale", "modules")
RANK_STEPS = 25  # part ranks: ~25 k kernels per rank at 8-64 ranks


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _saved(part: str) -> dict | None:
    path = dataset.OUT / f"results-{part}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def _run_part(part: str, session: suite.Session) -> None:
    started, load = time.monotonic(), _load()
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    size = None
    if part == "main":
        size = {}
        for shape in session.shapes:
            run = dataset.main_run(session.steps, shape)
            size[shape] = dataset.size_of(run)
            suite.main_suite(session, run, shape)
    elif part == "scale":
        suite.scale_suite(session)
    elif part == "ranks":
        suite.ranks_suite(session, session.rank_steps, tuple(session.rank_shapes))
    elif part == "modules":
        suite.modules_suite(session, dataset.main_run(session.steps))
    else:
        suite.whatif_suite(session)
    result = {
        "part": part,
        "started": stamp,
        "duration_s": time.monotonic() - started,
        "load_before": load,
        "load_after": _load(),
        "jobs": session.jobs,
        "dataset": size,
        "rows": session.rows,
    }
    (dataset.OUT / f"results-{part}.json").write_text(json.dumps(result, indent=1))
    session.rows = []


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "--part",
        choices=("all", *PARTS),
        default="all",
        help="main: the 8-rank comparison in each shape; ranks: 8-64 small ranks of the paced "
        "shapes, local and Dask engines; whatif: the what-if stage; scale: 1-8 ranks, "
        "0.25-1 M kernels; modules: each module alone (default: all five)",
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=DEFAULT_BUDGET_S,
        help="seconds for everything; measurements that do not fit are reported as skipped",
    )
    parser.add_argument(
        "-j", "--jobs", type=int, default=2, help="reports nsyswrap normalizes at a time"
    )
    parser.add_argument(
        "--steps",
        type=int,
        default=dataset.FULL_STEPS,
        help="steps per rank (~1000 kernels each); fewer for a quick try",
    )
    parser.add_argument(
        "--shapes",
        default=",".join(dataset.SHAPES),
        help="part main: the shapes measured, comma-separated (default: "
        + ", ".join(dataset.SHAPES)
        + "); part ranks: those of them that are paced",
    )
    parser.add_argument(
        "--rank-steps",
        type=int,
        default=RANK_STEPS,
        help="part ranks: steps per rank at 8-64 ranks (also 4x and 16x at 8 ranks)",
    )
    args = parser.parse_args(argv)
    dataset.OUT.mkdir(parents=True, exist_ok=True)
    shapes = [s.strip() for s in args.shapes.split(",") if s.strip()]
    unknown = sorted(set(shapes) - set(dataset.SHAPES))
    if unknown:
        parser.error(f"no shape {', '.join(unknown)}; the shapes: {', '.join(dataset.SHAPES)}")
    session = suite.Session(args.budget, args.jobs, args.steps, args.rank_steps)
    session.shapes = shapes
    session.rank_shapes = [s for s in shapes if s != dataset.QUEUED]
    for part in PARTS:
        if args.part in ("all", part):
            _run_part(part, session)
    previous = results.RESULTS_MD.read_text() if results.RESULTS_MD.is_file() else ""
    text = results.render({part: _saved(part) for part in PARTS}, previous)
    results.RESULTS_MD.write_text(text + "\n")
    print(text)
    print(f"\nwrote {results.RESULTS_MD}", file=sys.stderr)


if __name__ == "__main__":
    main()
