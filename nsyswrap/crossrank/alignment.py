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
DRIFT_MIN_SPAN_NS. Outliers are then left out, drifts rounded to whole ppb and the
offsets refitted to whole ns (see _solve): on exact ends the clocks come out exact,
and so does every aligned time (solve.to_run_time). A rank outside the reference's
connected set is tied to a rank on the same host whose clock is aligned (same host
clock), else it is left unaligned.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from nsyswrap.crossrank.graph import components

DRIFT_MIN_SPAN_NS = 200_000_000
DRIFT_MIN_COLLECTIVES = 8
HUBER_K = 2.5
REJECT_K = 6.0  # ends this many robust scales off the robust fit are outliers
ITERATIONS = 12
CLOCK_COLUMNS = ["rank", "utc_epoch_ns", "offset_ns", "drift_ppb", "shift_ns", "uncertainty_ns", "spread_ns",
                 "max_residual_ns", "collectives", "source", "method", "aligned", "host"]


def _components(ranks: list[int], ends: pd.DataFrame) -> dict[int, int]:
    """Ranks connected through shared collectives."""
    links = [(members[0], m) for members in ends.groupby("cid")["rank"].agg(list) for m in members[1:]]
    return components(ranks, links)


def _centred(design: np.ndarray, y: np.ndarray, inv: np.ndarray, w: np.ndarray):
    """Design and observations less their weighted mean within each collective (the
    common end E_c eliminated), and the collectives' total weights."""
    W = np.bincount(inv, weights=w, minlength=inv.max() + 1)
    W_safe = np.where(W > 0, W, 1.0)
    A_mean = np.zeros((len(W), design.shape[1]))
    np.add.at(A_mean, inv, design * w[:, None])
    y_mean = np.bincount(inv, weights=y * w, minlength=len(W)) / W_safe
    return design - (A_mean / W_safe[:, None])[inv], y - y_mean[inv], W


def _fit(design: np.ndarray, y: np.ndarray, inv: np.ndarray, w: np.ndarray):
    """Weighted least squares of the centred model; (params, residuals, centred design)."""
    A_c, y_c, _ = _centred(design, y, inv, w)
    params = np.zeros(design.shape[1])
    if design.shape[1]:
        sw = np.sqrt(w)
        params, *_ = np.linalg.lstsq(A_c * sw[:, None], -y_c * sw, rcond=None)
    return params, y_c + A_c @ params, A_c


def _solve(ends: pd.DataFrame, ranks: list[int], drifting: set[int], utc: dict[int, int], ref: int):
    """Offsets and drifts; returns (offset, drift_ppb, stderr, residuals) per rank.

    1. IRLS with Huber weights (robust scale: 1.4826 MAD, at least 1 ns) over offsets
       and drifts; its covariance gives the uncertainty.
    2. Ends further than REJECT_K robust scales from the fit are outliers; plain least
       squares over the rest.
    3. Drifts are rounded to whole ppb (1 ns per second of run; their standard error on
       real runs is far larger), then the offsets are refitted over the inliers with the
       drift applied exactly as the run clock applies it (solve.to_run_time: ns rounded
       half to even). Exact ends (members ending at one instant, integer ns, the clock
       model's own rounding) thus give the exact offsets: every residual is 0."""
    free = [r for r in ranks if r != ref]
    col = {r: i for i, r in enumerate(free)}
    dcol = {r: len(free) + i for i, r in enumerate(sorted(drifting - {ref}))}
    n_par = len(free) + len(dcol)
    rank = ends["rank"].to_numpy()
    x = ends["end_ns"].to_numpy(np.float64)
    y = np.array([utc[r] - utc[ref] for r in rank], np.float64) + x
    a_idx = np.array([col.get(r, -1) for r in rank])
    d_idx = np.array([dcol.get(r, -1) for r in rank])
    _, inv = np.unique(ends["cid"].to_numpy(), return_inverse=True)
    rows = np.arange(len(y))
    offsets = np.zeros((len(y), len(free)))
    offsets[rows[a_idx >= 0], a_idx[a_idx >= 0]] = 1.0
    design = np.zeros((len(y), n_par))
    design[:, :len(free)] = offsets
    design[rows[d_idx >= 0], d_idx[d_idx >= 0]] = x[d_idx >= 0] / 1e9  # drift in ns per s (ppb)
    w = np.ones(len(y))
    for _ in range(ITERATIONS):
        params, resid, A_c = _fit(design, y, inv, w)
        scale = max(1.4826 * float(np.median(np.abs(resid))), 1.0)
        new_w = np.minimum(1.0, HUBER_K * scale / np.maximum(np.abs(resid), 1e-9))
        if np.allclose(new_w, w):
            break
        w = new_w
    cov = np.zeros((n_par, n_par))
    if n_par:
        normal = (A_c * w[:, None]).T @ A_c
        dof = max(1, len(y) - n_par - (inv.max() + 1))
        cov = np.linalg.pinv(normal) * float((w * resid ** 2).sum()) / dof
    inliers = (np.abs(resid) <= REJECT_K * scale).astype(np.float64)
    params, *_ = _fit(design, y, inv, inliers)
    drift = {r: float(np.round(params[dcol[r]])) + 0.0 if r in dcol else 0.0  # + 0.0: no -0.0
             for r in ranks}
    d_row = np.array([drift[r] for r in rank])
    y_fixed = y + np.round(x * d_row / 1e9)
    off, resid, _ = _fit(offsets, y_fixed, inv, inliers)
    offset = {ref: 0.0, **{r: off[i] for r, i in col.items()}}
    stderr = {ref: 0.0, **{r: float(np.sqrt(max(cov[i, i], 0.0))) for r, i in col.items()}}
    return offset, drift, stderr, pd.Series(resid, index=ends.index)


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
        # (one clock alone, e.g. one report holding several ranks, has no residuals)
        mine = (resid.reindex(fit.index[fit["rank"] == r]).dropna() if r in connected
                else pd.Series(dtype=float))
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
        "drift_ppb": float(r["drift"]),
        "shift_ns": r["utc_epoch_ns"] - utc[ref] + round(r["offset"]),
        "uncertainty_ns": None if r["stderr"] is None else int(np.ceil(3 * r["stderr"])),
        "spread_ns": None if r["spread"] is None else round(r["spread"]),
        "max_residual_ns": None if r["maxres"] is None else round(r["maxres"]),
        "collectives": r["collectives"], "source": r["source"], "method": r["method"],
        "aligned": r["aligned"], "host": r["host"],
    } for r in by_rank.values()], columns=CLOCK_COLUMNS)
    return out, resid
