"""Can BASE and NEW be compared? Checked before any figure.

Blocking (refused unless --force): different ranks, devices or process groups, a
different capture (GPU activity, CUDA API, NVTX or collective ranges recorded in one run
only; with both runs' manifest.json: nsyswrap launch's --trace, --nsys-arg, --annotate),
or kernel names / NVTX range texts that overlap less than MIN_OVERLAP. Listed
only: a different nsys version, fewer than MIN_STEPS steps on a side.
"""

from __future__ import annotations

import pandas as pd

from nsyswrap.comparison.samples import LAUNCH_OPTIONS, RunSamples
from nsyswrap.comparison.significance import MIN_STEPS
from nsyswrap.errors import NsysWrapError

MIN_OVERLAP = 0.5
"""Kernel GPU time (either run) in names both runs have, and NVTX range texts in common
over all texts: below this share the runs ran different programs."""


def check(base: RunSamples, new: RunSamples) -> pd.DataFrame:
    """One row per check: check, base, new, ok, blocking (a failed blocking check refuses)."""
    rows = [
        _row("ranks", _span(base.ranks), _span(new.ranks), base.ranks == new.ranks),
        _row("devices", _devices(base), _devices(new), base.devices == new.devices),
        _row("process groups", _groups(base), _groups(new), base.groups == new.groups),
    ]
    for what in base.traced:
        b, n = base.traced[what], new.traced.get(what, False)
        rows.append(_row(f"captured {what.replace('_', ' ')}", _yes(b), _yes(n), b == n))
    if base.launch_options is not None and new.launch_options is not None:
        for key, b in base.launch_options.items():
            n = new.launch_options.get(key)
            rows.append(_row(f"launch {LAUNCH_OPTIONS[key]}", _text(b), _text(n), b == n))
    kb, kn = _kernel_overlap(base, new)
    rows.append(
        _row("kernel time in common names", f"{kb:.0%}", f"{kn:.0%}", min(kb, kn) >= MIN_OVERLAP)
    )
    ro = _jaccard(base.range_texts, new.range_texts)
    rows.append(_row("NVTX range texts in common", f"{ro:.0%}", f"{ro:.0%}", ro >= MIN_OVERLAP))
    rows.append(
        _row(
            "nsys version",
            ", ".join(base.nsys_versions) or "?",
            ", ".join(new.nsys_versions) or "?",
            base.nsys_versions == new.nsys_versions,
            blocking=False,
        )
    )
    rows.append(
        _row(
            f"steps (>= {MIN_STEPS} for a reliable interval)",
            str(len(base.steps)),
            str(len(new.steps)),
            min(len(base.steps), len(new.steps)) >= MIN_STEPS,
            blocking=False,
        )
    )
    return pd.DataFrame(rows)


def refuse_unless_forced(checks: pd.DataFrame, base: str, new: str, force: bool) -> None:
    """One line naming what differs, unless `force`."""
    failed = checks[checks["blocking"] & ~checks["ok"]]
    if failed.empty or force:
        return
    what = "; ".join(f"{r.check}: {r.base} vs {r.new}" for r in failed.itertuples(index=False))
    raise NsysWrapError(
        f"{base} vs {new}",
        f"the runs are not comparable ({what})",
        "compare runs of the same job and capture, or pass --force",
    )


def _row(check: str, base: str, new: str, ok: bool, blocking: bool = True) -> dict:
    return {"check": check, "base": base, "new": new, "ok": bool(ok), "blocking": blocking}


def _text(value) -> str:
    if isinstance(value, (list, tuple)):
        return " ".join(map(str, value)) or "none"
    return "none" if value in (None, "") else str(value)


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _span(ranks: list[int]) -> str:
    """0-3 for consecutive ranks, else the list; with the count."""
    if ranks and ranks == list(range(ranks[0], ranks[-1] + 1)) and len(ranks) > 2:
        text = f"{ranks[0]}-{ranks[-1]}"
    else:
        text = ",".join(map(str, ranks))
    return f"{len(ranks)} ({text})"


def _devices(run: RunSamples) -> str:
    per_rank = {d for r, d in run.devices}
    return f"{len(run.devices)} (devices {','.join(map(str, sorted(per_rank)))})"


def _groups(run: RunSamples) -> str:
    return ", ".join(f"pg {g} x{n}" for g, n in run.groups) or "none"


def _kernel_overlap(base: RunSamples, new: RunSamples) -> tuple[float, float]:
    common = base.kernel_ns.keys() & new.kernel_ns.keys()

    def share(ns: dict) -> float:
        total = sum(ns.values())
        return sum(ns[k] for k in common) / total if total else 1.0

    return share(base.kernel_ns), share(new.kernel_ns)


def _jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0
