"""Rule naive_overlap: the single-rank section's note where the usual overlap estimate,
from summed kernel times, is far from the exact one."""

from __future__ import annotations

from nsyswrap.report.diagnosis.facts import Totals
from nsyswrap.report.diagnosis.rule import Limits, Rule, Threshold

NOTE = (
    "Note: the usual estimate (compute + comm - span) / comm says {naive:.0%} overlap"
    "{impossible}, the exact overlap is {exact:.0%}; summed kernel times mislead when streams "
    "run at once or the GPU idles."
)
IMPOSSIBLE = " (an impossible value)"


def find(t: Totals, limits: Limits | None = None) -> str | None:
    """The note on totals `t` (every GPU's summed), or None."""
    x = limits or RULE.limits()
    if not t.comm_sum_ns:
        return None
    naive = (t.compute_sum_ns + t.comm_sum_ns - t.span_ns) / t.comm_sum_ns
    exact = t.both_ns / t.comm_busy_ns if t.comm_busy_ns else 0.0
    if abs(naive - exact) < x.misleads_by:
        return None
    impossible = IMPOSSIBLE if not 0 <= naive <= 1 else ""
    return NOTE.format(naive=naive, impossible=impossible, exact=exact)


RULE = Rule(
    id="naive_overlap",
    kind="note",
    doc="""The single-rank section notes the usual overlap estimate, (compute + comm - span)
/ comm from summed kernel times, where it differs from the exact overlap (both / comm
busy, from unions) by {misleads_by} or more.""",
    thresholds=(
        Threshold("misleads_by", 0.10, "the naive overlap is noted when this far from the exact"),
    ),
    find=find,
)
