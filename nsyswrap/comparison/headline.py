"""The first lines of a diff: did the step get faster, by how much, how sure, and why.

The explanations are the significant changes, in the direction of the step time's, of
work that sets the step: a phase's own work per rank where the runs were replayed (two
ranks or more: the rank's time between its events, its waits for the others left out,
crossrank.own_work), else its host time (without waits) or GPU time (the larger change of
the two), and exposed communication beyond waiting for peers. Waiting is an effect, never
a cause. A change seen alike on every rank (all moved the same way,
most of them significantly) is named once, "on all ranks". Each says which share of the
step time's change it matches.
"""

from __future__ import annotations

import pandas as pd

from nsyswrap.comparison.significance import MIN_STEPS

TOP_CAUSES = 3
MIN_SHARE = 0.1  # explanations matching less of the change are not named
ALIKE = 0.3  # "on all ranks": every rank changed in the same direction, most of them
# significantly, each by at least this fraction of the largest change


def headline(figs: pd.DataFrame) -> list[str]:
    """The headline lines (see the module doc)."""
    step = figs[figs["id"] == "step_time"]
    if step.empty:
        return ["step time: not compared (no steps on one side)"]
    s = step.iloc[0]
    half = (s.ci_high - s.ci_low) / 2 / abs(s.base) if s.base else float("nan")
    where = f"p50 over {s.n_base} vs {s.n_new} steps"
    first = (
        f"step time {_pct(s.rel_delta)} ± {abs(half) * 100:.1f} % "
        f"({_ms(s.base)} -> {_ms(s.new)} per step, {where})"
    )
    if not s.significant:
        return [
            first + ": no significant change (the 95 % interval "
            f"{_ms(s.ci_low, sign=True)} .. {_ms(s.ci_high, sign=True)} includes 0)"
        ]
    lines = [first + (": faster" if s.delta < 0 else ": slower")]
    causes = explanations(figs, s.delta)
    if causes.empty:
        lines.append(
            "no phase or exposed communication change explains it; see the kernel and range tables"
        )
    for c in causes.itertuples(index=False):
        lines.append(
            f"{c.what} {_ms(c.delta, sign=True)} per step explains {c.share * 100:.0f} % of it"
        )
    return lines


def warnings(figs: pd.DataFrame) -> list[str]:
    """Too few steps for a reliable interval."""
    step = figs[figs["id"] == "step_time"]
    if step.empty:
        return []
    n = min(int(step.iloc[0].n_base), int(step.iloc[0].n_new))
    if n >= MIN_STEPS:
        return []
    return [
        f"only {n} steps on a side (fewer than {MIN_STEPS}): the intervals are unreliable; "
        "capture more steps"
    ]


def explanations(figs: pd.DataFrame, step_delta: float) -> pd.DataFrame:
    """Candidate causes (what, delta per step, share of the step change), largest first.
    A phase's change is its own work's where the runs were replayed (section own_work:
    waits left out, so a rank that merely waited less is no cause), else its host or GPU
    time's."""
    work = "own_work" if (figs["section"] == "own_work").any() else "phase"
    cand = figs[
        (figs["section"] == work)
        | ((figs["section"] == "exposed_comm") & (figs["metric"] == "beyond_wait"))
    ]
    cand = cand.assign(size=cand["delta"].abs())
    # per (rank, phase): the larger of the host and the GPU change
    cand = cand.sort_values("size", ascending=False).drop_duplicates(
        ["section", "rank", "device", "item"]
    )
    rows = []
    for (section, item), group in cand.groupby(["section", "item"], sort=False):
        label = (
            (item or "work outside phases")
            if section == work
            else ("exposed communication beyond waiting")
        )
        alike = (
            len(group) > 1
            and group["significant"].mean() > 0.5
            and (group["delta"] * step_delta > 0).all()
            and group["size"].min() >= ALIKE * group["size"].max()
        )
        if alike:
            rows.append({"what": f"{label} on all ranks", "delta": group["delta"].mean()})
            continue
        for r in group[group["significant"] & (group["delta"] * step_delta > 0)].itertuples():
            rows.append({"what": f"{label} on {_where(r)}", "delta": r.delta})
    out = pd.DataFrame(rows, columns=["what", "delta"])
    out["share"] = out["delta"] / step_delta
    out = out[out["share"] >= MIN_SHARE]
    return out.sort_values("share", ascending=False, kind="stable").head(TOP_CAUSES)


def _where(r) -> str:
    dev = "" if pd.isna(r.device) else f" device {r.device}"
    return f"rank {r.rank}{dev}"


def _pct(x: float) -> str:
    return "n/a" if pd.isna(x) else f"{x * 100:+.1f} %".replace("-", "\u2212")


def _ms(ns: float, sign: bool = False) -> str:
    text = f"{ns / 1e6:+.3f} ms" if sign else f"{ns / 1e6:.3f} ms"
    return text.replace("-", "\u2212")
