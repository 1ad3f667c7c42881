"""The report's data-quality section: per report, what nsyswrap left out of every figure or
repaired while reading it (modules `trace.data_quality` and `trace.left_out`, and the step
ranges the step definition repaired, `steps.repairs`, in the notes only; a row's `rank`
is the report's, and where a report holds several ranks, `ranks` lists them all: its
figures are the whole report's, not its first rank's), reports without kernels, and
across ranks the collective calls left out of every cross-rank figure (with why) and each
clock that jumped or whose drift was refused (`crossrank.groups`,
`crossrank.clock_offsets`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nsyswrap.report.captured import NO_GPU_WORK, TRACED_MODULES, traced, traced_note
from nsyswrap.report.figures import COUNT, NS, figure
from nsyswrap.report.options import ReportOptions

if TYPE_CHECKING:
    import pandas as pd

    from nsyswrap.report.flow import Inputs

LEFT_OUT = {
    "kernels_end_before_start": ("end_lt_start", "end before start"),
    "kernels_null_time": ("no_time", "no start or end"),
    "kernels_longer_than_capture": ("too_long", "longer than the whole capture"),
    "kernels_outside_capture": ("outside", "outside the capture"),
    "kernels_not_integer": ("not_integer", "a time or place that is not a whole number"),
    "kernels_no_device": ("no_device", "no device"),
}


def data_quality_modules(options: ReportOptions) -> dict[str, tuple[str, dict]]:
    """The section's modules, `key: (module, params)`."""
    pattern = {"step_pattern": options.step_pattern}
    return {
        "quality": ("trace.data_quality", {}),
        "left_out": ("trace.left_out", {}),
        "groups": ("crossrank.groups", pattern),
        "clocks": ("crossrank.clock_offsets", pattern),
        "repairs": ("steps.repairs", pattern),
        **TRACED_MODULES,
    }


def data_quality_section(inputs: Inputs) -> dict:
    """Build the section dict (see nsyswrap.report for the layout); `notes` holds one line
    per problem found, also shown as the table's title."""
    frames, held = inputs.frames, inputs.held
    quality = frames["quality"].merge(frames["left_out"], on="rank")
    names = {r.rank: r.path.name for r in inputs.reports}
    captured = traced(inputs)
    several = any(len(ranks) > 1 for ranks in held.values())
    rows, notes, cannot = [], [], []
    for q in quality.itertuples(index=False):
        ranks = held.get(q.rank) or [int(q.rank)]
        name = names.get(q.rank)
        who = f"rank {q.rank}" if len(ranks) < 2 else f"{name} (ranks {', '.join(map(str, ranks))})"
        rows.append(
            {
                "rank": int(q.rank),
                **({"ranks": ",".join(map(str, ranks))} if several else {}),
                "capture": figure(q.capture_ns, NS, "the report records no capture duration"),
                "kernels": figure(q.kernels_captured, COUNT),
                **{key: figure(getattr(q, column), COUNT) for column, (key, _) in LEFT_OUT.items()},
                "other_events": figure(q.events_left_out, COUNT),
                "nvtx": figure(q.nvtx_ranges, COUNT),
                "nvtx_no_text": figure(q.nvtx_ranges_without_text, COUNT),
                "repaired": figure(q.strings_repaired, COUNT),
                "ids_repeated": figure(q.string_ids_repeated, COUNT),
            }
        )
        if not q.kernels_captured:
            cannot.append(
                {
                    "what": f"the CUDA kernels of {who}" + (f" ({name})" if len(ranks) < 2 else ""),
                    "reason": _no_kernels([t for t in captured if t["rank"] == q.rank]),
                }
            )
        notes += _report_notes(q, who)
    notes += step_notes(frames["repairs"])
    notes += crossrank_notes(frames["groups"], frames["clocks"])
    title = "Data quality: " + ("; ".join(notes) if notes else "nothing left out or repaired")
    return {
        "id": "data_quality",
        "title": "Data quality",
        "verdict": None,
        "recommendations": [],
        "notes": notes,
        "tables": [{"id": "data_quality", "title": title, "rows": rows}],
        "cannot_answer": cannot,
    }


def _unnamed_note(who: str, q) -> str:
    """The line of a report's kernels without a name string: what they were taken as."""
    left = q.kernels_unnamed - q.kernels_unnamed_nccl - q.kernels_unnamed_compute
    return (
        f"{who}: {q.kernels_unnamed} of {q.kernels_captured} kernels have no name (ids "
        f"missing from StringIds): {q.kernels_unnamed_nccl} taken as NCCL and "
        f"{q.kernels_unnamed_compute} as compute (by the NCCL range around their launch, "
        f"their stream or their shape), {left} left out of every figure"
    )


def step_notes(repairs: pd.DataFrame) -> list[str]:
    """A line for the step ranges the step definition repaired (`steps.repairs`: a step
    number used again, numbered on; ranges reaching into the next step, cut), the ranks
    with the same counts together."""
    said = {
        "renumbered": "use a step number again (an epoch restarting?): numbered on after the "
        "highest, so no two steps merge (steps.ranges lists them)",
        "cut": "reach into the next step: cut where it begins, so no time counts in two steps",
    }
    notes = []
    for column, what in said.items():
        hit = repairs[repairs[column] > 0]
        for (count, ranges), ranks in hit.groupby([column, "ranges"], sort=False)["rank"]:
            who = f"rank {ranks.iloc[0]}" if len(ranks) == 1 else f"ranks {_listed(ranks)}"
            each = " each" if len(ranks) > 1 else ""
            notes.append(f"{who}: {count} of {ranges} step ranges{each} {what}")
    return notes


def _listed(ranks) -> str:
    names = [str(int(r)) for r in ranks]
    return ", ".join(names[:-1]) + f" and {names[-1]}"


def _report_notes(q, who: str) -> list[str]:
    """One line per problem of one report's data (its trace.data_quality and trace.left_out
    row `q`)."""
    notes = []
    left_out = {
        label: int(getattr(q, column))
        for column, (_, label) in LEFT_OUT.items()
        if getattr(q, column)
    }
    if left_out:
        detail = ", ".join(f"{n} {label}" for label, n in left_out.items())
        notes.append(
            f"{who}: {sum(left_out.values())} of {q.kernels_captured} kernels left "
            f"out of every figure ({detail}): their times or places cannot be right"
        )
    if q.events_left_out:
        notes.append(
            f"{who}: {q.events_left_out} other events (copies, memsets, "
            "synchronizations, CUDA API calls, NVTX events) left out of every figure: "
            "their times or places cannot be right"
        )
    if q.nvtx_ranges_without_text:
        notes.append(
            f"{who}: {q.nvtx_ranges_without_text} of {q.nvtx_ranges} NVTX ranges "
            "have no text (kept, but they cannot be named)"
        )
    if q.strings_repaired:
        notes.append(
            f"{who}: {q.strings_repaired} names or NVTX texts were not valid UTF-8 "
            "(read with replacement characters)"
        )
    if q.string_ids_repeated:
        notes.append(
            f"{who}: {q.string_ids_repeated} StringIds rows repeat an id "
            "(each id keeps its smallest value)"
        )
    if q.kernels_unnamed:
        notes.append(_unnamed_note(who, q))
    return notes


def crossrank_notes(groups: pd.DataFrame, clocks: pd.DataFrame) -> list[str]:
    """One line for the collective calls left out across ranks (by why: crossrank.groups),
    one per clock that jumped (its host, the run time and the size) or whose drift was
    refused (crossrank.clock_offsets)."""
    notes = []
    left = groups[groups["left_out"].fillna(0) > 0]
    if len(left):
        why = left.assign(why=left["status"].map(_why)).groupby("why", sort=False)["left_out"].sum()
        detail = ", ".join(f"{int(n):,} {w}" for w, n in why.items())
        total, calls = int(left["left_out"].sum()), int(groups["calls"].sum())
        notes.append(
            f"{total:,} of {calls:,} collective calls left out of every cross-rank figure "
            f"({detail}; see crossrank.groups)"
        )
    jumped = clocks[clocks["jump_ns"].fillna(0) != 0].drop_duplicates("clock")
    for r in jumped.itertuples(index=False):
        at = r.jump_at_ns - r.jump_ns
        at_run = at + r.shift_ns + round(at * r.drift_ppb / 1e9)
        size = r.jump_ns / 1e6
        notes.append(
            f"the clock of {r.clock} steps {size:+,.3f} ms at {at_run / 1e9:,.3f} s of "
            "run time: fitted piecewise (its times after the step are taken "
            f"{size:,.3f} ms back)"
        )
    notes += alignment_notes(clocks)
    refused = clocks[clocks["method"].str.contains("beyond any clock oscillator", na=False)]
    for r in refused.drop_duplicates("clock").itertuples(index=False):
        notes.append(
            f"the clock of {r.clock} fits a drift beyond any clock oscillator: none is "
            "fitted, so its times may be off (see crossrank.clock_offsets)"
        )
    return notes


def alignment_notes(clocks) -> list[str]:
    """One line for the ranks left unaligned (so out of every cross-rank figure), one per
    clock aligned by point-to-point bounds alone (nsyswrap.crossrank.p2p_clocks), with
    its uncertainty."""
    notes = []
    unaligned = clocks[~clocks["aligned"].astype(bool)]
    if len(unaligned):
        ranks = ", ".join(map(str, sorted(unaligned["rank"].astype(int))))
        why = "; ".join(dict.fromkeys(m.removeprefix("unaligned: ") for m in unaligned["method"]))
        notes.append(f"ranks {ranks} are not aligned ({why}): left out of every cross-rank figure")
    bounded = clocks[clocks["source"].eq("p2p")].drop_duplicates("clock")
    for r in bounded.itertuples(index=False):
        notes.append(
            f"the clock of {r.clock} is aligned by point-to-point transfers alone: within "
            f"+-{r.uncertainty_ns / 1e3:,.1f} us (a receive ends after its send began; see "
            "crossrank.clock_offsets)"
        )
    return notes


def _why(status: str) -> str:
    """A group's status as the reason its calls were left out."""
    if status == "matched":
        return "not on every member or after a divergence (crossrank.mismatches)"
    if status.startswith("ambiguous"):
        return "in groups that could not be told apart (ambiguous)"
    if "not aligned" in status:
        return "on ranks whose clock is not aligned"
    return "on streams or groups seen on one rank only"


def _no_kernels(captured: list[dict]) -> str:
    """Why a report has no kernel rows, and what to do (captured: its trace.capture row)."""
    note = traced_note(captured, "cuda")
    if note is None:
        return (
            "no CUDA kernels captured (the report has no kernel rows); capture with nsys "
            "profile --trace=cuda on a GPU"
        )
    return f"no CUDA kernels captured (the report has no kernel rows), though {note}: {NO_GPU_WORK}"
