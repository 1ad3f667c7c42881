"""Persistent or intermittent: one rule for every part of the report that knows, per
observed step, whether a cause affected it (a step is affected when the cause's cost in it
is above the step-to-step noise; the caller decides that).

Over the observed steps (every step of a capture, or the sampled steps of the sampler),
a cause is **persistent** when it affected more than half of them (MOST), **intermittent**
when it affected fewer but some, else **none**. Its **windows** are the runs of consecutive
observed steps it affected; each says the observed steps just before and after it (not
affected), so the true edges of a window of sampled steps lie between those and its ends.
"""

from __future__ import annotations

from collections.abc import Iterable

MOST = 0.5


def episodes(affected: Iterable[int], observed: Iterable[int]) -> dict:
    """{kind, affected, observed, windows: [{first, last, steps, before, after}]} (see the
    module doc); `before`/`after` are None at the edges of what was observed."""
    seen = sorted(set(observed))
    hit = set(affected) & set(seen)
    windows: list[dict] = []
    for at, step in enumerate(seen):
        if step not in hit:
            continue
        if windows and windows[-1]["at"] == at - 1:
            windows[-1].update(last=step, at=at, steps=windows[-1]["steps"] + 1)
        else:
            windows.append(
                {
                    "first": step,
                    "last": step,
                    "steps": 1,
                    "at": at,
                    "before": seen[at - 1] if at else None,
                }
            )
    for w in windows:
        at = w.pop("at")
        w["after"] = seen[at + 1] if at + 1 < len(seen) else None
    kind = "persistent" if len(hit) > MOST * len(seen) else "intermittent" if hit else "none"
    return {"kind": kind, "affected": len(hit), "observed": len(seen), "windows": windows}


def describe(found: dict, what: str = "steps") -> str:
    """In words: `persistent: in 95 of 100 sampled steps` or `intermittent: in sampled
    steps 40-60 (3 of 20 sampled steps)`."""
    if found["kind"] == "none":
        return f"in none of {found['observed']} {what}"
    count = f"{found['affected']} of {found['observed']} {what}"
    if found["kind"] == "persistent":
        return f"persistent: in {count}"
    spans = ", ".join(
        str(w["first"]) if w["first"] == w["last"] else f"{w['first']}-{w['last']}"
        for w in found["windows"]
    )
    return f"intermittent: in {what} {spans} ({count})"
