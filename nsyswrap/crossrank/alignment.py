"""Clock alignment: one robust solve over the run's true barriers, one clock per host.

**Only true barriers.** A collective whose end is a synchronisation point of all its
members ends at one instant on every member, whatever their clocks: all_reduce,
all_gather, reduce_scatter and barrier (NCCL's ring or tree finishes with one last hop;
MPI's Allreduce, Allgather, Reduce_scatter, Barrier return once everyone's data is in).
Only those ends are solved for (nsyswrap.crossrank.matching.is_barrier picks them). An
all_to_all, a send/recv, a broadcast or a reduce is not one: each member ends when its own
transfers are done (an all_to_all member with a hot expert as peer ends hundreds of us
after the others; a broadcast's root before its receivers), so fitting clocks to those ends
would tilt every clock by the transfers.

**One clock per host.** The reports of one host read one clock (nsys takes the session
time from the host's clock; utcEpochNs is that clock at the session start), so a host is
one unknown clock: one offset and one drift, its reports' offsets following from their
session starts (offset_r = offset_host + drift x (utcEpochNs_r - utcEpochNs of the host's
lowest report) / 1e9). The reports of one host are solved apart only when their ends
disagree with one clock by more than SHARED_CLOCK_NS at the ends of NCCL kernels (their
UTC starts were recorded with different errors, as in generated runs with per-rank clock
errors; ends timed on the host are late by thread wake-ups, too noisy to tell); reports
with no host recorded are each a clock of their own.

For member i of collective c with end x_ic on its session clock, host clock h:

    utc_i + x_ic + offset_h + drift_h * (x_ic + o_i) - jump_h * [x_ic >= theta_i] = E_c

(o_i: utc_i - utcEpochNs of h's origin report; E_c: the common true end, eliminated by
weighted centring per collective). Offsets, drifts and jumps of all clocks are solved at
once by iteratively reweighted least squares (Huber weights on the robust residual scale)
with the reference clock (the host of the lowest report with a matched barrier) fixed.
Every group ties its members, so clocks sharing no collective with the reference are
aligned through the others. A drift is fitted per clock only where its collectives span
at least DRIFT_MIN_SPAN_NS; a drift beyond +-MAX_DRIFT_PPB (what no oscillator does) is
not reported as a fit: the clock is solved without drift and its method says why.

**Jumps.** A clock that steps (a time-base resync, captures stitched together) shows as
a step in its residuals (nsyswrap.crossrank.jumps finds it, one at a time: a line plus one
step at each place between two collective ends, kept when it is big and holds for the
medians on both sides; only the ends of collectives that span two clocks or more are
looked at: a collective on one clock fits whatever the clocks are). It becomes a third
unknown of that clock: its size and, per report, the session time from which readings are
late (the first of the report's host events, its collective calls and step and phase
ranges, after the first hole longer than the jump). The clock is then fitted piecewise:
aligned time takes ``t - jump_ns`` for ``t >= jump_at_ns``.

**Exact where exact.** After the robust fit, ends more than REJECT_K robust scales off it
are outliers and left out; the robust scale is that of the ends of collectives across
clocks (where most collectives lie inside one host, e.g. TP groups with DP pairs across
hosts, their residuals of 0 would otherwise make every end across hosts an outlier and
leave the clocks unconstrained); drifts are rounded to whole ppb and jumps to whole ns, and the
offsets refitted to whole ns with the drift applied as the run clock applies it
(to_run_time: rounded half to even). Exact ends on clocks that follow this model
give every offset, drift and jump exactly: every residual is 0. Residuals are always
against the fitted clock: a collective whose every member is an outlier is compared with
the median of its members' aligned ends.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from nsyswrap.crossrank.graph import components
from nsyswrap.crossrank.jumps import find_jump, jump_at

DRIFT_MIN_SPAN_NS = 200_000_000
DRIFT_MIN_COLLECTIVES = 8
MAX_DRIFT_PPB = 500_000  # +-500 ppm: beyond any clock oscillator
HUBER_K = 2.5
REJECT_K = 6.0  # ends this many robust scales off the robust fit are outliers
ITERATIONS = 12
SHARED_CLOCK_NS = 5_000  # reports of one host further apart than this are clocks of their own
MAX_PASSES = 8
CLOCK_COLUMNS = [
    "rank",
    "utc_epoch_ns",
    "offset_ns",
    "drift_ppb",
    "shift_ns",
    "uncertainty_ns",
    "spread_ns",
    "max_residual_ns",
    "collectives",
    "source",
    "method",
    "aligned",
    "host",
    "clock",
    "jump_at_ns",
    "jump_ns",
]


@dataclass
class Clock:
    """One unknown clock: the reports that read it, its origin report, what is fitted."""

    name: str
    reports: list[int]
    drifting: bool = False
    drift_refused: float | None = None  # a fitted drift beyond MAX_DRIFT_PPB (ppb)
    jump: dict[int, tuple[float, float]] | None = None  # report -> (last end before, first after)
    split_from: str | None = None  # the host clock it was split from, and by how much
    split_ns: float = 0.0
    fit: dict = field(default_factory=dict)

    @property
    def origin(self) -> int:
        return min(self.reports)


def host_clocks(sessions: pd.DataFrame, tie_hosts: bool) -> list[Clock]:
    """One clock per host recorded (tie_hosts), else one per report."""
    clocks: dict[str, Clock] = {}
    for r, host in zip(sessions["rank"], sessions["host"]):
        name = (
            f"host {host}" if tie_hosts and isinstance(host, str) and host else f"report {int(r)}"
        )
        clocks.setdefault(name, Clock(name, [])).reports.append(int(r))
    return list(clocks.values())


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


def _against_fit(aligned: np.ndarray, inv: np.ndarray, inliers: np.ndarray) -> np.ndarray:
    """Each end's residual against its collective's common end on the fitted clocks: the
    mean of its inliers' aligned ends, or of all its members' median when none is one."""
    n = inv.max() + 1
    W = np.bincount(inv, weights=inliers, minlength=n)
    mean = np.bincount(inv, weights=aligned * inliers, minlength=n) / np.where(W > 0, W, 1.0)
    median = pd.Series(aligned).groupby(inv).median().reindex(range(n)).to_numpy()
    return aligned - np.where(W > 0, mean, median)[inv]


def _solve(
    ends: pd.DataFrame, clocks: list[Clock], ref: Clock, utc: dict[int, int]
) -> tuple[pd.Series, pd.Series]:
    """Fit every clock (see the module doc); sets each clock's ``fit`` (offset, drift, jump,
    stderr) and returns every end's residual against the fitted clocks and whether it is an
    inlier.

    1. IRLS with Huber weights (robust scale: 1.4826 MAD, at least 1 ns) over offsets,
       drifts and jumps; its covariance gives the uncertainty.
    2. Ends further than REJECT_K robust scales from the fit are outliers; plain least
       squares over the rest.
    3. Drifts rounded to whole ppb (1 ns per second of run; their standard error on real
       runs is far larger), jumps to whole ns, then the offsets refitted over the inliers
       with the drift applied exactly as the run clock applies it."""
    index = {r: k for k, c in enumerate(clocks) for r in c.reports}
    free = [k for k, c in enumerate(clocks) if c is not ref]
    drifting = [k for k in free if clocks[k].drifting]
    jumping = [k for k, c in enumerate(clocks) if c.jump]
    n_par = len(free) + len(drifting) + len(jumping)

    def columns(chosen: list[int], first: int) -> np.ndarray:
        """Per clock: its parameter's column, or -1."""
        out = np.full(len(clocks), -1)
        out[chosen] = np.arange(first, first + len(chosen))
        return out

    ranks = ends["rank"]
    ci = ranks.map(index).to_numpy()  # each end's clock
    col, dcol = columns(free, 0)[ci], columns(drifting, len(free))[ci]
    jcol = columns(jumping, len(free) + len(drifting))[ci]
    x = ends["end_ns"].to_numpy(np.float64)
    base = (ranks.map(utc) - utc[ref.origin]).to_numpy(np.float64)
    origin = (ranks.map(utc) - ranks.map(lambda r: utc[clocks[index[r]].origin])).to_numpy(
        np.float64
    )
    post = ends["post"].to_numpy(bool)
    y = base + x
    _, inv = np.unique(ends["cid"].to_numpy(), return_inverse=True)
    across = _across(ends, clocks).to_numpy()
    rows = np.arange(len(y))
    design = np.zeros((len(y), n_par))
    design[rows[col >= 0], col[col >= 0]] = 1.0
    design[rows[(jcol >= 0) & post], jcol[(jcol >= 0) & post]] = -1.0
    offsets = design[:, : len(free)].copy()
    jump = np.zeros(len(y))
    for _ in range(2 if jumping and drifting else 1):  # the drift runs on the clock less its jump
        d = dcol >= 0
        design[rows[d], dcol[d]] = ((x - jump * post + origin) / 1e9)[d]  # ppb
        params, cov, inliers = _robust_fit(design, y, inv, across)
        jump = np.where(jcol >= 0, params[np.maximum(jcol, 0)] if n_par else 0.0, 0.0)
    for k, c in enumerate(clocks):
        dk, jk = columns(drifting, len(free))[k], columns(jumping, len(free) + len(drifting))[k]
        ok = columns(free, 0)[k]
        c.fit = {
            "drift": float(np.round(params[dk])) + 0.0 if dk >= 0 else 0.0,  # + 0.0: no -0.0
            "drift_float": float(params[dk]) if dk >= 0 else 0.0,
            "jump": float(np.round(params[jk])) if jk >= 0 else 0.0,
            "stderr": float(np.sqrt(max(cov[ok, ok], 0.0))) if ok >= 0 else 0.0,
        }
    drift = np.array([c.fit["drift"] for c in clocks])[ci]
    corrected = x - np.array([c.fit["jump"] for c in clocks])[ci] * post
    y_fixed = base + corrected + np.round(corrected * drift / 1e9) + np.round(origin * drift / 1e9)
    off, _, _ = _fit(offsets, y_fixed, inv, inliers)
    for k, c in enumerate(clocks):
        ok = columns(free, 0)[k]
        c.fit["offset"] = float(off[ok]) if ok >= 0 else 0.0
    aligned = y_fixed + np.array([c.fit["offset"] for c in clocks])[ci]
    resid = _against_fit(aligned, inv, inliers)
    return pd.Series(resid, index=ends.index), pd.Series(inliers.astype(bool), index=ends.index)


def _robust_fit(design: np.ndarray, y: np.ndarray, inv: np.ndarray, across: np.ndarray):
    """(params, their covariance, inlier weights): IRLS with Huber weights, then plain least
    squares over the ends within REJECT_K robust scales (see _solve). The robust scale is
    that of the ends in collectives `across` clocks (where there are any): the ends of a
    collective on one clock fit whatever the clocks are, and where most collectives are
    (a TP group inside each host, DP pairs across them) their residuals of 0 would make
    every end across hosts an outlier and leave the clocks unconstrained."""
    n_par = design.shape[1]
    w = np.ones(len(y))
    for _ in range(ITERATIONS):
        params, resid, A_c = _fit(design, y, inv, w)
        pool = resid[across] if across.any() else resid
        scale = max(1.4826 * float(np.median(np.abs(pool))), 1.0)
        new_w = np.minimum(1.0, HUBER_K * scale / np.maximum(np.abs(resid), 1e-9))
        if np.allclose(new_w, w):
            break
        w = new_w
    cov = np.zeros((n_par, n_par))
    if n_par:
        normal = (A_c * w[:, None]).T @ A_c
        dof = max(1, len(y) - n_par - (inv.max() + 1))
        cov = np.linalg.pinv(normal) * float((w * resid**2).sum()) / dof
    inliers = (np.abs(resid) <= REJECT_K * scale).astype(np.float64)
    params, *_ = _fit(design, y, inv, inliers)
    return params, cov, inliers


def _across(ends: pd.DataFrame, clocks: list[Clock]) -> pd.Series:
    """Whether each end's collective spans two clocks or more: only those ends tell clocks
    apart (a collective on one clock fits whatever the clocks are)."""
    of = {r: k for k, c in enumerate(clocks) for r in c.reports}
    return ends["rank"].map(of).groupby(ends["cid"]).transform("nunique") > 1


def _disagreeing(clock: Clock, ends: pd.DataFrame, resid: pd.Series) -> float:
    """How far apart (ns) the reports of a clock are: the range of their median residuals,
    over the ends timed by NCCL kernels (the host's ends, ranges and completion marks, are
    late by thread wake-ups and the GIL, up to milliseconds: they cannot tell one clock's
    reports apart)."""
    mine = ends[
        ends["rank"].isin(clock.reports) & ends["on_gpu"].astype(bool)
    ]  # outliers too: a disagreeing report may be all outliers
    medians = resid[mine.index].groupby(mine["rank"]).median()
    return float(medians.max() - medians.min()) if len(medians) > 1 else 0.0


def _post(ends: pd.DataFrame, clocks: list[Clock]) -> pd.Series:
    """Whether each end lies after its clock's jump (readings at or after the first end
    after it; solve refines the threshold for the other events)."""
    after = {r: a for c in clocks if c.jump for r, (_, a) in c.jump.items()}
    first = ends["rank"].map(after)
    return (first.notna() & (ends["end_ns"] >= first.fillna(np.inf))).astype(bool)


def solve_ends(
    ends: pd.DataFrame, clocks: list[Clock], ref: Clock, utc: dict[int, int]
) -> pd.Series:
    """Solve until nothing changes: clocks of one host that disagree are split into one per
    report, the largest step of a clock other than the reference fitted as its jump (one
    at a time: a jump shows in every clock's residuals until it is fitted; which of two
    clocks stepped is told against the reference), drifts beyond MAX_DRIFT_PPB refused.
    Returns the residuals; `clocks` may gain members (split)."""
    resid = pd.Series(dtype=float)
    for _ in range(MAX_PASSES):
        ends["post"] = _post(ends, clocks)
        resid, _ = _solve(ends, clocks, ref, utc)
        split = [
            (c, spread)
            for c in clocks
            if (spread := _disagreeing(c, ends, resid)) > SHARED_CLOCK_NS
        ]
        for c, spread in split:
            with_ends = sorted(set(ends["rank"]) & set(c.reports))
            rest = [r for r in c.reports if r not in with_ends]
            parts = [
                Clock(
                    f"report {r}",
                    [r] + (rest if r == with_ends[0] else []),
                    c.drifting,
                    split_from=c.name,
                    split_ns=spread,
                )
                for r in with_ends
            ]
            clocks.remove(c)
            clocks += parts
            if c is ref:
                ref = next(p for p in parts if ref.origin in p.reports)
        if split:
            continue
        across = ends[_across(ends, clocks)]
        steps = [
            (abs(f[0]), i, f[1])
            for i, c in enumerate(clocks)
            if c is not ref and not c.jump and (f := find_jump(c.reports, across, resid, utc))
        ]
        if steps:
            _, i, jump = max(steps)
            clocks[i].jump = jump
            continue
        refused = [c for c in clocks if c.drifting and abs(c.fit["drift_float"]) > MAX_DRIFT_PPB]
        for c in refused:
            c.drifting, c.drift_refused = False, c.fit["drift_float"]
        if not refused:
            break
    return resid


def solve_clocks(
    matched: pd.DataFrame, sessions: pd.DataFrame, tie_hosts: bool = True, events=None
) -> tuple[pd.DataFrame, pd.Series]:
    """Per rank of `sessions` (rank, utc_epoch_ns, host): offset, drift, jump, uncertainty,
    method. `matched` has one row per rank and matched true barrier: rank, pg, seq, end_ns
    (session ns of the common end), on_gpu. `events(report, lo, hi)`: the report's event
    times in (lo, hi], to place a jump (nsyswrap.crossrank.jumps.jump_at). Returns (the clock
    table, residual per row)."""
    sessions = sessions.sort_values("rank")
    ranks = sessions["rank"].astype(int).tolist()
    utc = dict(zip(ranks, sessions["utc_epoch_ns"].astype("int64")))
    host = dict(zip(ranks, sessions["host"]))
    ends = matched[["rank", "pg", "seq", "end_ns", "on_gpu"]].dropna(subset=["end_ns"]).copy()
    ends["rank"] = ends["rank"].astype(int)
    ends["cid"] = ends["pg"].astype(str) + "/" + ends["seq"].astype(str)
    clocks = host_clocks(sessions, tie_hosts)
    with_colls = sorted(set(ends["rank"]))
    ref_rank = with_colls[0] if with_colls else ranks[0]
    of = {r: c.name for c in clocks for r in c.reports}
    links = [(of[m[0]], of[x]) for m in ends.groupby("cid")["rank"].agg(list) for x in m[1:]]
    comp = components([c.name for c in clocks], links)
    connected = [c for c in clocks if comp[c.name] == comp[of[ref_rank]]]
    fit = ends[ends["rank"].isin([r for c in connected for r in c.reports])].copy()
    span = fit.groupby("rank")["end_ns"].agg(lambda v: v.max() - v.min())
    count = fit.groupby("rank").size()
    ref = next(c for c in connected if ref_rank in c.reports)
    for c in connected:
        c.drifting = c is not ref and any(
            span.get(r, 0) >= DRIFT_MIN_SPAN_NS and count.get(r, 0) >= DRIFT_MIN_COLLECTIVES
            for r in c.reports
        )
    resid = pd.Series(dtype=float)
    if fit["rank"].nunique() >= 2:  # one clock of several reports too: they may disagree
        resid = solve_ends(fit, connected, ref, utc)
        ref = next(c for c in connected if ref_rank in c.reports)
    jumps = {}
    for c in connected:
        c.fit = c.fit or {"offset": 0.0, "drift": 0.0, "jump": 0.0, "stderr": 0.0}
        if c.jump and c.fit["jump"]:
            jumps |= jump_at(c.jump, c.fit["jump"], events)
    rows = [
        _clock_row(r, utc, host, fit, resid, connected, ref, ref_rank, count, jumps) for r in ranks
    ]
    return pd.DataFrame(rows, columns=CLOCK_COLUMNS), resid


def _clock_row(
    r: int,
    utc: dict,
    host: dict,
    fit: pd.DataFrame,
    resid: pd.Series,
    connected: list[Clock],
    ref: Clock,
    ref_rank: int,
    count: pd.Series,
    late_from: dict,
) -> dict:
    """The clock table's row of report `r`."""
    c = next((c for c in connected if r in c.reports), None)
    row = {
        "rank": r,
        "utc_epoch_ns": utc[r],
        "host": host[r],
        "collectives": int(count.get(r, 0)),
        "clock": None if c is None else c.name,
        "jump_at_ns": None,
        "jump_ns": 0,
    }
    if c is None:
        return {
            **row,
            "offset_ns": 0,
            "drift_ppb": 0.0,
            "shift_ns": utc[r] - utc[ref_rank],
            "uncertainty_ns": None,
            "spread_ns": None,
            "max_residual_ns": None,
            "source": "utc",
            "aligned": False,
            "method": "unaligned: no matched collective connects it to the reference rank",
        }
    drift = c.fit["drift"]
    offset = round(c.fit["offset"]) + int(np.round((utc[r] - utc[c.origin]) * drift / 1e9))
    # (one clock alone, e.g. one report holding several ranks, has no residuals)
    mine = resid.reindex(fit.index[fit["rank"] == r]).dropna()
    gpu = fit.loc[fit["rank"] == r, "on_gpu"]
    source = (
        ("kernel" if gpu.all() else "nvtx")
        if len(gpu)
        else ("host" if r != ref_rank else "reference")
    )
    if late_from.get(r) is not None:
        row.update(jump_at_ns=late_from[r], jump_ns=int(c.fit["jump"]))
    return {
        **row,
        "offset_ns": offset,
        "drift_ppb": float(drift),
        "shift_ns": utc[r] - utc[ref_rank] + offset,
        "uncertainty_ns": int(np.ceil(3 * c.fit["stderr"])),
        "spread_ns": round(1.4826 * float(np.median(np.abs(mine)))) if len(mine) else 0,
        "max_residual_ns": round(float(np.abs(mine).max())) if len(mine) else 0,
        "source": source,
        "aligned": True,
        "method": _method(r, c, ref, ref_rank, len(mine)),
    }


def _method(r: int, c: Clock, ref: Clock, ref_rank: int, ends: int) -> str:
    """How report r's clock was obtained, in words."""
    if r == ref_rank:
        text = "reference"
    elif c is ref:
        text = "the reference's clock"
    else:
        text = "robust least squares over the matched true barriers" + (
            ", with linear drift" if c.drifting else ""
        )
    if len(c.reports) > 1 and c.name.startswith("host"):
        text += f"; {c.name}'s reports {', '.join(map(str, c.reports))} read one clock"
    if not ends and r != ref_rank:
        text += "; no matched true barrier of its own"
    if c.split_from:
        text += (
            f"; a clock of its own: the reports of {c.split_from} disagree with one clock by "
            f"{c.split_ns / 1e3:,.1f} us"
        )
    if c.drift_refused is not None:
        text += (
            f"; a drift of {c.drift_refused / 1e3:,.0f} ppm is beyond any clock oscillator, so "
            "none is "
            "fitted"
        )
    if c.jump and c.fit.get("jump"):
        text += f"; it steps {c.fit['jump'] / 1e6:+,.3f} ms mid-run: fitted piecewise"
    return text


def to_run_time(frame: pd.DataFrame, clock: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """`columns` (session ns) of `frame` (with rank) on the run clock: less the clock's jump
    from jump_at_ns on, then the drift term rounded half to even (the rule of the SQL macro
    run_ns); unaligned ranks dropped."""
    keep = ["rank", "shift_ns", "drift_ppb", "jump_at_ns", "jump_ns"]
    out = frame.merge(clock.loc[clock["aligned"].astype(bool), keep], on="rank")
    jumped = out["jump_at_ns"].notna().to_numpy()
    at = out["jump_at_ns"].fillna(0).to_numpy(np.int64)
    size = out["jump_ns"].fillna(0).to_numpy(np.int64)
    for c in columns:
        t = out[c].to_numpy(np.int64)
        t = t - np.where(jumped & (t >= at), size, 0)
        out[c] = (
            t
            + out["shift_ns"].to_numpy(np.int64)
            + np.round(t.astype(np.float64) * out["drift_ppb"].to_numpy(np.float64) / 1e9).astype(
                np.int64
            )
        )
    return out.drop(columns=keep[1:])
