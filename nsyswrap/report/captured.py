"""What each report's capture traced, so that a hint to capture something is given only
where the capture lacks it: a CPU run launched under nsys traced CUDA and ran no GPU work,
and is not told to capture with --trace=cuda (#38 item 8).

What was traced comes from nsys's own record (trace.capture's `traced`: META_DATA_CAPTURE,
from nsys 2023), else from the `--trace` that `nsyswrap launch` gave nsys (its manifest
beside the report), else it is unknown. The rows (`traced`) are the trace section's
`capture` table; the hints read them, on a run or on a report dict alike. A section that
reads them declares TRACED_MODULES among its modules (nsyswrap.report.registry).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nsyswrap.storage.reports import launch_trace

if TYPE_CHECKING:
    from nsyswrap.report.flow import Inputs

TRACED_MODULES = {"capture": ("trace.capture", {})}
"""The module `traced` reads, `key: (module, params)`, for a section's modules."""

NSYS, MANIFEST = "nsys", "launch manifest"
LABELS = {"cuda": "CUDA", "nvtx": "NVTX", "osrt": "the OS runtime"}
NO_GPU_WORK = (
    "the program ran no GPU work while captured (on the CPU, or on a GPU nsys could not see)"
)


def traced(inputs: Inputs) -> list[dict]:
    """Per report (`rank`: the report's), what its capture traced: `traced` (nsys --trace
    names, comma-separated; None: unknown) and `source` (nsys, launch manifest or None);
    from a section's inputs (TRACED_MODULES among its modules)."""
    said = {int(r.rank): r.traced for r in inputs.frames["capture"].itertuples()}
    held = inputs.held  # a report's row carries its lowest rank
    rows = []
    for report in inputs.reports:
        nsys = said.get(min(held[report.rank], default=report.rank))
        launched = None if isinstance(nsys, str) else launch_trace(report.path)
        rows.append(
            {
                "rank": report.rank,
                "traced": nsys if isinstance(nsys, str) else launched,
                "source": NSYS if isinstance(nsys, str) else MANIFEST if launched else None,
            }
        )
    return rows


def traced_all(rows: list[dict], what: str) -> bool:
    """Whether every report's capture is known to have traced `what` (cuda, nvtx, ...)."""
    return bool(rows) and all(what in (r["traced"] or "").split(",") for r in rows)


def traced_note(rows: list[dict], what: str) -> str | None:
    """When every report traced `what`, the words that say so ("CUDA was traced
    (--trace=cuda: nsys)"), else None: where such a capture holds none of it, the program
    made none while captured, and telling it to capture `what` would be wrong."""
    if not traced_all(rows, what):
        return None
    sources = " and ".join(sorted({r["source"] for r in rows}))
    return f"{LABELS.get(what, what)} was traced (--trace={what}: {sources})"
