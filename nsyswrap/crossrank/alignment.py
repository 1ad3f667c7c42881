"""Clock alignment as one robust solve over every matched collective of the run.

A collective ends at one instant on all its members (NCCL kernels end together; for
collectives timed by ranges, the range ends). For member i of collective c with end
x_ic on its session clock and UTC start utc_i:

    utc_i + x_ic + offset_i + drift_i * x_ic = E_c        (E_c: the common true end)

The E_c are eliminated (weighted centring per collective), the offsets and drifts of
all ranks are solved at once by iteratively reweighted least squares (Huber weights on
the robust residual scale), with the reference rank fixed at 0. Every group thus ties
its members, so ranks that share no collective with the reference are aligned through
the others. A drift is fitted per clock only where its collectives span at least
DRIFT_MIN_SPAN_NS. A rank outside the reference's connected set is tied to a rank on
the same host whose clock is aligned (same host clock), else it is left unaligned.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from nsyswrap.crossrank.graph import components

DRIFT_MIN_SPAN_NS = 200_000_000
DRIFT_MIN_COLLECTIVES = 8
HUBER_K = 2.5
ITERATIONS = 12
CLOCK_COLUMNS = ["rank", "utc_epoch_ns", "offset_ns", "drift_ppb", "shift_ns", "uncertainty_ns", "spread_ns",
                 "max_residual_ns", "collectives", "source", "method", "aligned", "host"]


def _components(ranks: list[int], ends: pd.DataFrame) -> dict[int, int]:
    """Ranks connected through shared collectives."""
    links = [(members[0], m) for members in ends.groupby("cid")["rank"].agg(list) for m in members[1:]]
    return components(ranks, links)


def _solve(ends: pd.DataFrame, ranks: list[int], drifting: set[int], utc: dict[int, int], ref: int):
    """IRLS; returns (offset, drift_ppb, stderr, residuals) per rank (floats)."""
    free = [r for r in ranks if r != ref]
    col = {r: i for i, r in enumerate(free)}
    dcol = {r: len(free) + i for i, r in enumerate(sorted(drifting - {ref}))}
    n_par = len(free) + len(dcol)
    rank = ends["rank"].to_numpy()
    cid = ends["cid"].to_numpy()
    x = ends["end_ns"].to_numpy(np.float64)
    s = x / 1e9  # seconds: drift in ns per s (ppb)
    y = np.array([utc[r] - utc[ref] for r in rank], np.float64) + x
    a_idx = np.array([col.get(r, -1) for r in rank])
    d_idx = np.array([dcol.get(r, -1) for r in rank])
    _, inv = np.unique(cid, return_inverse=True)
    w = np.ones(len(y))
    params = np.zeros(n_par)
    cov = np.zeros((n_par, n_par))
    for _ in range(ITERATIONS):
        W = np.bincount(inv, weights=w)
        # full design for (a, b), then weighted centring within each collective
        A = np.zeros((len(y), n_par))
        rows = np.arange(len(y))
        A[rows[a_idx >= 0], a_idx[a_idx >= 0]] = 1.0
        A[rows[d_idx >= 0], d_idx[d_idx >= 0]] = s[d_idx >= 0]
        A_mean = np.zeros((len(W), n_par))
        np.add.at(A_mean, inv, A * w[:, None])
        A_c = A - (A_mean / W[:, None])[inv]
        y_mean = np.bincount(inv, weights=y * w) / W
        y_c = y - y_mean[inv]
        sw = np.sqrt(w)
        if n_par:
            params, *_ = np.linalg.lstsq(A_c * sw[:, None], -y_c * sw, rcond=None)
        resid = y_c + A_c @ params
        scale = max(1.4826 * float(np.median(np.abs(resid))), 1.0)
        new_w = np.minimum(1.0, HUBER_K * scale / np.maximum(np.abs(resid), 1e-9))
        if np.allclose(new_w, w):
            break
        w = new_w
    if n_par:
        normal = (A_c * w[:, None]).T @ A_c
        dof = max(1, len(y) - n_par - len(W))
        sigma2 = float((w * resid ** 2).sum()) / dof
        cov = np.linalg.pinv(normal) * sigma2
    offset = {ref: 0.0, **{r: params[i] for r, i in col.items()}}
    drift = {r: (params[dcol[r]] if r in dcol else 0.0) for r in ranks}
    stderr = {ref: 0.0, **{r: float(np.sqrt(max(cov[i, i], 0.0))) for r, i in col.items()}}
    residuals = pd.Series(resid, index=ends.index)
    return offset, drift, stderr, residuals


def solve_clocks(matched: pd.DataFrame, sessions: pd.DataFrame,
                 tie_hosts: bool = True) -> tuple[pd.DataFrame, pd.Series]:
    """Per rank of `sessions` (rank, utc_epoch_ns, host): offset, drift, uncertainty, method.

    `matched` has one row per rank and matched collective: rank, pg, seq, end_ns (session
    ns of the common end), on_gpu. Returns (the clock table, residual per matched row)."""
    sessions = sessions.sort_values("rank")
    ranks = sessions["rank"].astype(int).tolist()
    utc = dict(zip(ranks, sessions["utc_epoch_ns"].astype("int64")))
    host = dict(zip(ranks, sessions["host"]))
    ends = matched[["rank", "pg", "seq", "end_ns", "on_gpu"]].dropna(subset=["end_ns"]).copy()
    ends["rank"] = ends["rank"].astype(int)
    ends["cid"] = ends["pg"].astype(str) + "/" + ends["seq"].astype(str)
    with_colls = sorted(set(ends["rank"]))
    ref = with_colls[0] if with_colls else ranks[0]
    comp = _components(ranks, ends)
    connected = [r for r in ranks if comp[r] == comp[ref]]
    fit = ends[ends["rank"].isin(connected)]
    span = fit.groupby("rank")["end_ns"].agg(lambda v: v.max() - v.min())
    count = fit.groupby("rank").size()
    drifting = {r for r in connected if span.get(r, 0) >= DRIFT_MIN_SPAN_NS
                and count.get(r, 0) >= DRIFT_MIN_COLLECTIVES}
    drifting.discard(ref)
    offset, drift, stderr, resid = (_solve(fit, connected, drifting, utc, ref) if len(connected) >= 2
                                    else ({ref: 0.0}, {ref: 0.0}, {ref: 0.0}, pd.Series(dtype=float)))
    gpu = fit.groupby("rank")["on_gpu"].all()
    rows = []
    for r in ranks:
        mine = resid[fit.index[fit["rank"] == r]] if r in connected else pd.Series(dtype=float)
        row = {"rank": r, "utc_epoch_ns": utc[r], "host": host[r], "collectives": int(count.get(r, 0))}
        if r in connected:
            source = "kernel" if gpu.get(r, False) else ("nvtx" if r in gpu else "reference")
            method = ("reference" if r == ref else
                      "robust least squares over all matched collectives"
                      + (", with linear drift" if r in drifting else ""))
            row.update(offset=offset[r], drift=drift[r], stderr=stderr[r], source=source, method=method,
                       aligned=True, spread=1.4826 * float(np.median(np.abs(mine))) if len(mine) else 0.0,
                       maxres=float(np.abs(mine).max()) if len(mine) else 0.0)
        else:
            row.update(offset=0.0, drift=0.0, stderr=None, source="utc", aligned=False,
                       method="unaligned: no matched collective connects it to the reference rank",
                       spread=None, maxres=None)
        rows.append(row)
    by_rank = {row["rank"]: row for row in rows}
    for row in rows:  # same host clock: tie an unconnected rank to an aligned one on its host
        if row["aligned"] or not tie_hosts or not isinstance(row["host"], str):
            continue
        mate = next((m for m in rows if m["aligned"] and m["host"] == row["host"]), None)
        if mate is not None:
            row.update(offset=mate["offset"], drift=mate["drift"], stderr=mate["stderr"], source="host",
                       aligned=True, method=f"same host clock as rank {mate['rank']} ({row['host']})")
    out = pd.DataFrame([{
        "rank": r["rank"], "utc_epoch_ns": r["utc_epoch_ns"], "offset_ns": round(r["offset"]),
        "drift_ppb": round(r["drift"], 3),
        "shift_ns": r["utc_epoch_ns"] - utc[ref] + round(r["offset"]),
        "uncertainty_ns": None if r["stderr"] is None else int(np.ceil(3 * r["stderr"])),
        "spread_ns": None if r["spread"] is None else round(r["spread"]),
        "max_residual_ns": None if r["maxres"] is None else round(r["maxres"]),
        "collectives": r["collectives"], "source": r["source"], "method": r["method"],
        "aligned": r["aligned"], "host": r["host"],
    } for r in by_rank.values()], columns=CLOCK_COLUMNS)
    return out, resid
