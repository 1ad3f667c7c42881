"""Cross-rank analysis: clock alignment, collective matching, stragglers, bandwidth."""
from nsyswrap.crossrank.alpha_beta import fit_alpha_beta
from nsyswrap.crossrank.metrics import (
    bandwidth,
    clock_offsets,
    matched_collectives,
    mismatches,
    phase_lag,
    stragglers,
)

__all__ = [
    "bandwidth", "clock_offsets", "fit_alpha_beta", "matched_collectives",
    "mismatches", "phase_lag", "stragglers",
]
