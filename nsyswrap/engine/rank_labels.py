"""Every per-report result in the run's rank identity.

A per-report result's `rank` is its report's. When a report holds several ranks (one
capture around torchrun), the run object `rank_map` (declared in `sql/_run`, built by the
domain, see its header) says which rank each row takes: a row whose (report, `pid`) is
listed takes that rank, else one whose (report, `device`) is, else its report's. The map
has no row when every report is one rank, its own: results are then unchanged.
"""

from __future__ import annotations

from weakref import WeakKeyDictionary

import pandas as pd

from nsyswrap.engine import planner

MAP = "rank_map"
_READ: WeakKeyDictionary = WeakKeyDictionary()  # run -> its maps, read once per run


def rank_maps(run) -> tuple[dict, dict, dict]:
    """(report_rank, pid) -> rank, (report_rank, device) -> rank, report_rank -> rank."""
    if run not in _READ:
        _READ[run] = _read(run)
    return _READ[run]


def _read(run) -> tuple[dict, dict, dict]:
    planner.bind(run, MAP, {})
    rows = run.connection.execute(f'SELECT * FROM "{MAP}"').df()
    by_pid = {
        (int(r.report_rank), int(r.pid)): int(r.rank)
        for r in rows.dropna(subset=["pid"]).itertuples(index=False)
    }
    by_device = {
        (int(r.report_rank), int(r.device)): int(r.rank)
        for r in rows.dropna(subset=["device"]).itertuples(index=False)
    }
    by_report = {
        int(r.report_rank): int(r.rank)
        for r in rows[rows["pid"].isna() & rows["device"].isna()].itertuples(index=False)
    }
    return by_pid, by_device, by_report


def label(run, frame: pd.DataFrame) -> pd.DataFrame:
    """A per-report result (`rank` = report rank) with each row's rank the run's (a run of
    hand-made tables has no reports: its rows keep theirs)."""
    if "rank" not in frame or not run.reports:
        return frame
    by_pid, by_device, by_report = rank_maps(run)
    if not by_report:
        return frame
    keys = zip(
        frame["rank"],
        frame["pid"] if "pid" in frame else [None] * len(frame),
        frame["device"] if "device" in frame else [None] * len(frame),
    )
    ranks = [by_pid.get((r, p), by_device.get((r, d), by_report.get(r, r))) for r, p, d in keys]
    return frame.assign(rank=pd.Series(ranks, index=frame.index, dtype=frame["rank"].dtype))


def label_sql(run, columns: list[str]) -> tuple[str, dict]:
    """`label` as a SQL expression over a per-report result of `columns` (and its bound
    values): "rank" itself when every report is one rank."""
    if "rank" not in columns or not run.reports:
        return '"rank"', {}
    by_pid, by_device, by_report = rank_maps(run)
    if not by_report:
        return '"rank"', {}
    cases, values = [], {}
    for column, mapping in (("pid", by_pid), ("device", by_device)):
        if column not in columns:
            continue
        for i, ((report, key), rank) in enumerate(mapping.items()):
            cases.append(
                f'WHEN "rank" = $r_{column}{i} AND "{column}" = $k_{column}{i} THEN $to_{column}{i}'
            )
            values |= {f"r_{column}{i}": report, f"k_{column}{i}": key, f"to_{column}{i}": rank}
    for i, (report, rank) in enumerate(by_report.items()):
        cases.append(f'WHEN "rank" = $r_report{i} THEN $to_report{i}')
        values |= {f"r_report{i}": report, f"to_report{i}": rank}
    return f'CAST(CASE {" ".join(cases)} ELSE "rank" END AS INTEGER)', values
