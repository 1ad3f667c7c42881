"""Checked against the fix: what the replay of BASE predicted against what NEW measured, and
which rank and phase did the change (`nsyswrap diff` with two ranks or more).

* **Measured**: the run's step time as the replay defines it (crossrank.step_times: from
  the previous step's end on its last rank to its own end on its last rank), its mean
  over the steps both runs have in the window, stalled steps included (a median hides
  stalls in a few steps). The window is the diff's; without `--steps`, from the first
  step neither report sets apart as warm-up (nsyswrap.report.window), to the last.
* **Who changed**: each rank's own work per phase (crossrank.own_work: its time between
  its events, waits left out), mean per step, BASE against NEW. A change is attributed to
  the rank and phase whose own work changed the most in the direction of the step time,
  never to a rank that merely waited less (its waits are not its work); where the same
  phase changed by at least SMALL of the change on other ranks too (stalls that move
  between ranks), the phase on all of them. Its steps: those where BASE's own work there
  differs from NEW's median by more than 3 x BASE's step-to-step noise
  (crossrank.whatif's noise_ns).
* **Predicted**: what the replay of BASE says fixing that rank's phase saves
  (crossrank.whatif, kind rank_phase; on several ranks, the pipeline stage they are,
  kind stage, else the phase on every rank), against the measured change. A link
  between hosts whose bus bandwidth changed by more than LINK_CHANGE (crossrank.links)
  is named instead where BASE's replay of it at its healthy bandwidth saves more. Where
  the two differ by more than TOLERANCE of the measured: where NEW changed less than
  predicted and its named phase is still longer than the other ranks', the fix was
  partial (the replay predicts making it as fast as them); else the other own-work
  changes in the same direction (each at least SMALL of the measured change) say where
  the rest went: work that changed too, which nothing recorded in BASE ties to the named
  phase (a dependency the trace does not record), so the replay of that one fix keeps it
  as recorded.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from nsyswrap.engine.queries import run_module
from nsyswrap.engine.run import Run
from nsyswrap.report.diagnosis.rules.replay_causes import range_low
from nsyswrap.report.diagnosis.words import listed
from nsyswrap.report.options import ReportOptions
from nsyswrap.report.window import choose_window

TOLERANCE = 0.15
NOISE_K = 3
OTHERS = 3  # other own-work changes named where the prediction misses
SMALL = 0.05  # ... each at least this share of the measured change (and the one named)
LINK_CHANGE = 1.25  # a link's bandwidth changed: NEW's over BASE's beyond this, either way
OWN_WORK_COLUMNS = ["rank", "phase", "base_ns", "new_ns", "delta_ns", "share", "steps"]


@dataclass
class RunReplay:
    """One run's replay figures over the compared window."""

    steps: pd.DataFrame  # crossrank.step_times
    own_work: pd.DataFrame  # crossrank.own_work
    fixes: pd.DataFrame  # crossrank.whatif
    links: pd.DataFrame  # crossrank.links
    gpus: pd.DataFrame  # trace.gpus: the physical GPU of each rank


@dataclass
class FixCheck:
    """The check of a diff: `measured` (BASE mean step time less NEW's, ns), the steps it
    is over, the own-work changes (OWN_WORK_COLUMNS, largest first), the named rank and
    phase with BASE's prediction for it, and the headline lines."""

    steps: list[int]
    base_ns: float
    new_ns: float
    own_work: pd.DataFrame
    named: dict | None
    predicted_ns: float | None
    lines: list[str]

    noise_ns: float = 0.0
    left_ns: float = 0.0  # NEW's named phase still behind the other ranks' (per step)
    link: dict | None = None  # a link between hosts whose bandwidth changed, when named
    in_steps_ns: float | None = None  # the measured change in the named change's steps alone
    shared: list[int] | None = None  # ranks sharing a GPU with the named ones (contention)
    predicted_low_ns: float | None = None  # the prediction's low end (None: one figure)
    low_reason: str | None = None  # why it is a range: LOW_REASONS' key

    @property
    def measured_ns(self) -> float:
        return self.base_ns - self.new_ns

    @property
    def stands_out(self) -> bool:
        """The mean step time changed by more than NOISE_K x BASE's step-to-step noise."""
        return abs(self.measured_ns) > NOISE_K * self.noise_ns


def window(runs: list[Run], options: ReportOptions) -> dict:
    """The replay's window of both runs: the diff's, else from the first step neither
    report sets apart as warm-up to the last (outliers after it included)."""
    params = {"step_pattern": options.step_pattern, "step_to": options.step_to}
    if options.step_from is not None or options.step_to is not None:
        return {**params, "step_from": options.step_from}
    firsts = [choose_window(run, options).options.step_from for run in runs]
    return {**params, "step_from": max((f for f in firsts if f is not None), default=None)}


def replay_of(run: Run, params: dict) -> RunReplay:
    """A run's step times, own work and what-if rows over the window `params`."""
    return RunReplay(
        run_module(run, "crossrank.step_times", **params),
        run_module(run, "crossrank.own_work", **params),
        run_module(run, "crossrank.whatif", **params),
        run_module(run, "crossrank.links", **params),
        run_module(run, "trace.gpus"),
    )


def check(base: RunReplay, new: RunReplay) -> FixCheck | None:
    """The check (module doc), None where a run has no replayed step."""
    steps = sorted(set(base.steps["step"].dropna()) & set(new.steps["step"].dropna()))
    if not steps:
        return None
    mean = {
        side: r.steps.loc[r.steps["step"].isin(steps), "recorded_ns"].mean()
        for side, r in (("base", base), ("new", new))
    }
    own = own_work_changes(base, new, steps, mean["base"] - mean["new"])
    named = _named(own)
    if named is not None:
        named["stage"] = _stage_of(named, base.own_work)
    predicted, low, reason = (None, None, None) if named is None else _predicted(base.fixes, named)
    noise = float(base.fixes["noise_ns"].max()) if len(base.fixes) else 0.0
    out = FixCheck(steps, mean["base"], mean["new"], own, named, predicted, [], noise)
    out.predicted_low_ns, out.low_reason = low, reason
    out.left_ns = 0.0 if named is None else _still_behind(new, steps, named)
    if named is not None:
        out.in_steps_ns = _in_steps(base, new, steps, named)
        out.shared = sharing_a_gpu(base.gpus, named["ranks"])
    link = link_change(base.links, new.links)
    if link is not None and (named is None or link["predicted_ns"] >= abs(named["delta_ns"])):
        out.link, out.predicted_ns = link, link["predicted_ns"]
        out.predicted_low_ns = out.low_reason = None
    out.lines = headline(out)
    return out


def _in_steps(base: RunReplay, new: RunReplay, steps: list[int], named: dict) -> float | None:
    """The measured change (BASE less NEW) in the named change's steps alone, per step of
    the window (so that it adds to the rest); None where those steps are all or none."""
    mine = sorted({s for st in named["steps"].values() for s in st})
    if not mine or len(mine) == len(steps):
        return None
    times = [r.steps.set_index("step")["recorded_ns"].reindex(mine) for r in (base, new)]
    return float((times[0] - times[1]).sum()) / len(steps)


def sharing_a_gpu(gpus: pd.DataFrame, ranks: list[int]) -> list[int]:
    """The ranks on the same physical GPU as any of `ranks` (trace.gpus), `ranks` among
    them; [] where none shares one."""
    known = gpus.dropna(subset=["gpu_key"])
    keys = set(known.loc[known["rank"].isin(ranks), "gpu_key"])
    on = sorted(int(r) for r in known.loc[known["gpu_key"].isin(keys), "rank"].unique())
    return on if len(on) > 1 else []


def own_work_changes(
    base: RunReplay, new: RunReplay, steps: list[int], measured: float
) -> pd.DataFrame:
    """Per rank and phase: own work per step in each run, the change, its share of the
    measured step time change (positive: in its direction), the steps where it changed;
    largest share first."""
    per = []
    for r in (base, new):
        w = r.own_work[r.own_work["step"].isin(steps)].fillna({"phase": ""})
        per.append(w.groupby(["rank", "phase"])["work_ns"].sum() / len(steps))
    out = pd.concat(per, axis=1, keys=["base_ns", "new_ns"]).fillna(0).reset_index()
    out["delta_ns"] = out["new_ns"] - out["base_ns"]
    out["share"] = -out["delta_ns"] / measured if measured else 0.0
    noise = base.fixes["noise_ns"].max() if len(base.fixes) else 0
    out["steps"] = [
        _changed_steps(base, new, r, p, steps, noise) for r, p in zip(out["rank"], out["phase"])
    ]
    out = out.sort_values("share", ascending=False, kind="stable").reset_index(drop=True)
    return out[OWN_WORK_COLUMNS]


def _changed_steps(base, new, rank, phase, steps, noise) -> list[int]:
    """The steps where BASE's own work of (rank, phase) differs from NEW's median by more
    than NOISE_K x the noise."""

    def series(r: RunReplay) -> pd.Series:
        w = r.own_work[(r.own_work["rank"] == rank) & (r.own_work["phase"].fillna("") == phase)]
        return w.groupby("step")["work_ns"].sum().reindex(steps, fill_value=0)

    b, typical = series(base), series(new).median()
    return [int(s) for s, v in b.items() if abs(v - typical) > NOISE_K * (noise or 0)]


def _still_behind(new: RunReplay, steps: list[int], named: dict) -> float:
    """How much longer per step NEW's own work of the named phase is on its rank than the
    median of the other ranks' (0: not longer)."""
    w = new.own_work[new.own_work["step"].isin(steps)].fillna({"phase": ""})
    per_rank = w[w["phase"] == named["phase"]].groupby("rank")["work_ns"].sum() / len(steps)
    if len(named["ranks"]) > 1:  # a phase on several ranks: none is behind the rest alone
        return 0.0
    rank = named["ranks"][0]
    others = per_rank.drop(index=rank, errors="ignore")
    if others.empty or rank not in per_rank:
        return 0.0
    return max(0.0, float(per_rank[rank] - others.median()))


def _named(own: pd.DataFrame) -> dict | None:
    """The own-work change named (module doc): the largest in the step time's direction,
    with its phase on the other ranks where that changed by at least SMALL of the change
    too (stalls that move between ranks); None where nothing changed that way."""
    if own.empty or own.iloc[0]["share"] < SMALL:
        return None
    top = own.iloc[0]
    same = own[(own["phase"] == top["phase"]) & (own["share"] >= SMALL)]
    same = same if len(same) > 1 else own.iloc[:1]
    return {
        "ranks": [int(r) for r in same["rank"]],
        "phase": top["phase"],
        "delta_ns": float(same["delta_ns"].sum()),
        "share": float(same["share"].sum()),
        "steps": {int(r): st for r, st in zip(same["rank"], same["steps"])},
        "stage": None,
    }


def _stage_of(named: dict, own_work: pd.DataFrame) -> int | None:
    """The pipeline stage whose ranks are exactly the named ranks (several), else None."""
    ranks = own_work.dropna(subset=["stage"]).drop_duplicates("rank")
    stage = dict(zip(ranks["rank"].astype(int), ranks["stage"].astype(int)))
    found = {stage.get(r) for r in named["ranks"]}
    if len(named["ranks"]) < 2 or len(found) != 1 or None in found:
        return None
    (s,) = found
    return s if sorted(r for r, t in stage.items() if t == s) == sorted(named["ranks"]) else None


def link_change(base: pd.DataFrame, new: pd.DataFrame) -> dict | None:
    """The link between hosts (crossrank.links) whose bus bandwidth changed the most, by
    more than LINK_CHANGE either way: hosts, both bandwidths, its healthy one and BASE's
    replayed gain at it (what NEW's link, if healthy, saves); None where none did."""
    both = base.merge(new, on=["host_a", "host_b"], suffixes=("", "_new"))
    both = both[(both["busbw_gb_per_s"] > 0) & (both["busbw_gb_per_s_new"] > 0)]
    ratio = both["busbw_gb_per_s_new"] / both["busbw_gb_per_s"]
    both = both[(ratio > LINK_CHANGE) | (ratio < 1 / LINK_CHANGE)]
    if both.empty:
        return None
    r = both.loc[np.log(both["busbw_gb_per_s_new"] / both["busbw_gb_per_s"]).abs().idxmax()]
    return {
        "hosts": [r["host_a"], r["host_b"]],
        "base_gb_per_s": float(r["busbw_gb_per_s"]),
        "new_gb_per_s": float(r["busbw_gb_per_s_new"]),
        "healthy_gb_per_s": float(r["healthy_gb_per_s"]),
        "predicted_ns": float(r["gain_ns_per_step"]),
    }


LOW_REASONS = {
    "steady": (
        "its steady excess alone, its step-to-step noise kept",
        "as fast as the other ranks in every step",
    ),
    "assumed": (
        "if the hosts waited for none of the completions the replay assumed they waited for",
        "if they waited for each: `assumed_waits`",
    ),
}
"""Why a prediction is a range: the words beside its low and its high end."""


def _predicted(fixes: pd.DataFrame, named: dict) -> tuple[float, float | None, str | None]:
    """BASE's replayed gain of fixing the named phase on its rank (on several: the stage
    they are, else every rank's, rank NULL); 0 where no row: it changes nothing; and the
    low end of its range with why (LOW_REASONS; None: one figure): where it counts its
    ranks' noise (crossrank.whatif's gain_steady_ns_per_step) or rests on waits the replay
    assumed (gain_low_ns_per_step), the lower of the two."""
    if named["stage"] is not None:
        row = fixes[(fixes["kind"] == "stage") & (fixes["stage"] == named["stage"])]
    else:
        one = len(named["ranks"]) == 1
        rank = fixes["rank"] == named["ranks"][0] if one else fixes["rank"].isna()
        phase = fixes["phase"].fillna("") == named["phase"]
        row = fixes[(fixes["kind"] == "rank_phase") & rank & phase]
    if not len(row):
        return 0.0, None, None
    gain = float(row["gain_ns_per_step"].iloc[0])
    lows = {
        "steady": range_low(gain, float(row["gain_steady_ns_per_step"].iloc[0])),
        "assumed": range_low(gain, float(row["gain_low_ns_per_step"].iloc[0]))
        if bool(row["assumed"].iloc[0])
        else None,
    }
    found = {k: v for k, v in lows.items() if v is not None}
    if not found:
        return gain, None, None
    reason = min(found, key=found.get)
    return gain, found[reason], reason


def headline(c: FixCheck) -> list[str]:
    """The diff's lines for the check (module doc)."""
    faster = "faster" if c.measured_ns > 0 else "slower"
    lines = [
        f"mean over {_steps(c.steps)}, stalled steps included: {_ms(c.base_ns)} -> "
        f"{_ms(c.new_ns)} per step: NEW is {_ms(abs(c.measured_ns))} per step {faster}"
    ]
    if c.link is not None:
        return lines + _link_lines(c)
    if c.named is None:
        return lines + ["no rank's own work changed in that direction"]
    what = _what(c.named)
    lines.append(
        f"{what}: its own work {_ms(abs(c.named['delta_ns']))} per step "
        f"{'shorter' if c.named['delta_ns'] < 0 else 'longer'} in NEW"
        f"{_where(c.named['steps'])}, {c.named['share'] * 100:.0f} % of the change; the "
        f"replay of BASE predicted {_prediction(c)} per step for it, NEW is "
        f"{_ms(abs(c.measured_ns))} per step {faster} ({_off(c)})"
    )
    return _with_gap(c, lines, what)


def _with_gap(c: FixCheck, lines: list[str], what: str) -> list[str]:
    """`lines`, and where the prediction misses by more than TOLERANCE, the change in the
    named change's own steps against it, and where the rest went."""
    gap = c.measured_ns - _nearest(c)
    if abs(gap) <= TOLERANCE * abs(c.measured_ns):
        return lines
    if c.in_steps_ns and c.link is None:
        share = (_nearest(c, c.in_steps_ns) - c.in_steps_ns) / abs(c.in_steps_ns)
        within = "within" if abs(share) <= TOLERANCE else "beyond"
        lines = lines + [
            f"in {_steps(sorted({s for st in c.named['steps'].values() for s in st}))} alone, "
            f"where it changed, NEW is {_ms(abs(c.in_steps_ns))} per step "
            f"{'faster' if c.in_steps_ns > 0 else 'slower'} (over the {len(c.steps)} steps): "
            f"the prediction is {_pct(share)} off it, {within} {TOLERANCE * 100:.0f} %"
        ]
    return lines + [_gap_line(c, gap, what)]


def _link_lines(c: FixCheck) -> list[str]:
    """The named link's line, and where the rest went where the prediction misses."""
    k = c.link
    what = f"the link between hosts {k['hosts'][0]} and {k['hosts'][1]}"
    faster = "faster" if c.measured_ns > 0 else "slower"
    lines = [
        f"{what}: {k['base_gb_per_s']:,.1f} GB/s in BASE, {k['new_gb_per_s']:,.1f} in NEW; the "
        f"replay of BASE predicted {_ms(c.predicted_ns)} per step for it at "
        f"{k['healthy_gb_per_s']:,.1f} GB/s, NEW is {_ms(abs(c.measured_ns))} per step "
        f"{faster} ({_off(c)})"
    ]
    return _with_gap(c, lines, what)


def _gap_line(c: FixCheck, gap: float, what: str) -> str:
    """Where the measured change the prediction misses went: a partial fix (NEW's named
    phase still behind the other ranks'), or the other own-work changes in its
    direction."""
    more = (gap > 0) == (c.measured_ns > 0)  # NEW changed more than predicted
    if not more and c.left_ns > TOLERANCE * abs(c.measured_ns):
        return (
            f"in NEW, {what} is still {_ms(c.left_ns)} per step longer than the other ranks' "
            "(the fix is partial): the replay predicted making it as fast as them"
        )
    rest = c.own_work
    if c.named is not None and c.link is None:
        named = (rest["phase"] == c.named["phase"]) & rest["rank"].isin(c.named["ranks"])
        rest = rest[~named]
    rest = rest[(rest["share"] > 0) == more]
    rest = rest[rest["delta_ns"].abs() >= SMALL * abs(c.measured_ns)].head(OTHERS)
    if rest.empty:
        return (
            f"the other {_ms(abs(gap))} per step is in no rank's own work: waits the replay "
            "of BASE does not see (see crossrank.replay_check)"
        )
    others = ", ".join(
        f"{_what(r)} {_ms(r['delta_ns'], sign=True)}{_in(r['steps'])}" for _, r in rest.iterrows()
    )
    return (
        f"the other {_ms(abs(gap))} per step is own work that changed too: {others}; nothing "
        f"recorded in BASE ties it to {what} (a dependency the trace does not record"
        f"{_contention(c, rest)}), so the replay of that fix alone keeps it as recorded"
    )


def _contention(c: FixCheck, rest: pd.DataFrame) -> str:
    """Where the other changes are on ranks sharing a GPU with the named one: so it says."""
    if not c.shared or not set(rest["rank"].astype(int)) & set(c.shared):
        return ""
    return (
        f": {listed('rank', c.shared)} share one GPU, and the replay takes each rank's own "
        "work as recorded, never slowed by another's: no contention"
    )


def _what(r) -> str:
    """A row of own-work changes (rank) or the named change (ranks) in words."""
    phase = f"`{r['phase']}`" if r["phase"] else "work outside phases"
    ranks = r["ranks"] if "ranks" in r else [int(r["rank"])]
    if len(ranks) > 1:
        stage = f" (pipeline stage {r['stage']})" if r.get("stage") is not None else ""
        return f"{phase} on {listed('rank', ranks)}{stage}"
    return f"rank {ranks[0]}'s {phase}"


def _where(steps: dict[int, list[int]]) -> str:
    """The named change's steps: its rank's, or each rank's where it is on several."""
    if len(steps) == 1:
        return _in(next(iter(steps.values())))
    parts = [f"rank {r} in {_steps(st)}" for r, st in steps.items() if st]
    return f" ({', '.join(parts)})" if parts else ""


def _prediction(c: FixCheck) -> str:
    """The prediction in words: one figure, or its range and why (LOW_REASONS)."""
    if c.predicted_low_ns is None:
        return _ms(c.predicted_ns)
    low, high = LOW_REASONS[c.low_reason]
    return f"{_ms(c.predicted_low_ns)} ({low}) to {_ms(c.predicted_ns)} ({high})"


def _nearest(c: FixCheck, measured: float | None = None) -> float:
    """Of the prediction's range (one figure: it), the figure nearest `measured` (the
    check's measured change)."""
    measured = c.measured_ns if measured is None else measured
    low = c.predicted_ns if c.predicted_low_ns is None else c.predicted_low_ns
    return min(max(measured, low), c.predicted_ns)


def _off(c: FixCheck) -> str:
    share = (_nearest(c) - c.measured_ns) / abs(c.measured_ns)
    if c.predicted_low_ns is not None and share == 0:
        return "within the range"
    within = "within" if abs(share) <= TOLERANCE else "beyond"
    return f"{_pct(share)}, {within} {TOLERANCE * 100:.0f} %"


def _pct(share: float) -> str:
    return f"{share * 100:+.0f} %".replace("-", "\u2212")


def _in(steps: list[int]) -> str:
    return f" (in {_steps(steps)})" if steps else ""


def _steps(steps: list[int]) -> str:
    return listed("step", steps)


def _ms(ns: float, sign: bool = False) -> str:
    text = f"{ns / 1e6:+.3f} ms" if sign else f"{ns / 1e6:.3f} ms"
    return text.replace("-", "\u2212")
