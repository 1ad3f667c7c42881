"""Cross-rank analysis: clock alignment, collective matching, stragglers, bandwidth."""

from nsyswrap.crossrank.alpha_beta import fit_alpha_beta
from nsyswrap.crossrank.metrics import (
    bandwidth,
    clock_offsets,
    comm_split,
    matched_collectives,
    mismatches,
    phase_lag,
    stragglers,
)

__all__ = [
    "bandwidth",
    "clock_offsets",
    "comm_split",
    "fit_alpha_beta",
    "matched_collectives",
    "mismatches",
    "phase_lag",
    "stragglers",
]
