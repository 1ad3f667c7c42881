"""Is a change real? A seeded bootstrap of the difference of per-step medians.

For each figure, the steps of BASE and of NEW are resampled with replacement
(RESAMPLES times, the same draws for every figure, seed SEED): the 2.5th and 97.5th
percentiles of median(NEW sample) - median(BASE sample) are the 95 % confidence interval.
A change is significant when the interval excludes 0. Deterministic: the same runs give
the same interval.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

RESAMPLES = 2000
SEED = 14
CONFIDENCE = 0.95
MIN_STEPS = 20
"""Fewer steps than this on a side: the interval is unreliable, the output warns."""
METHOD = (
    f"bootstrap {CONFIDENCE:.0%} CI of the difference of per-step medians "
    f"({RESAMPLES} resamples, seed {SEED})"
)
_CELLS = 4_000_000  # resampled values held at a time (resamples x steps x figures)


def compare_medians(base: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """base, new: steps x figure ids. Per figure id present on both sides: base and new
    medians, delta, relative delta, CI of the delta, significant, steps per side."""
    ids = [c for c in base.columns if c in new.columns]
    b, n = base[ids].to_numpy(float), new[ids].to_numpy(float)
    with warnings.catch_warnings():  # a figure without any value in a resample: NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        mb, mn = np.nanmedian(b, axis=0), np.nanmedian(n, axis=0)
        lo, hi = _bootstrap(b, n)
    delta = mn - mb
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(mb != 0, delta / np.abs(mb), np.nan)
    return pd.DataFrame(
        {
            "id": ids,
            "base": mb,
            "new": mn,
            "delta": delta,
            "rel_delta": rel,
            "ci_low": lo,
            "ci_high": hi,
            "significant": (lo > 0) | (hi < 0),
            "n_base": np.sum(~np.isnan(b), axis=0),
            "n_new": np.sum(~np.isnan(n), axis=0),
        }
    )


def _bootstrap(b: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(SEED)
    diffs = []
    chunk = max(1, _CELLS // max(1, (len(b) + len(n)) * b.shape[1]))
    for start in range(0, RESAMPLES, chunk):
        size = min(chunk, RESAMPLES - start)
        ib = rng.integers(0, len(b), (size, len(b)))
        inn = rng.integers(0, len(n), (size, len(n)))
        diffs.append(np.nanmedian(n[inn], axis=1) - np.nanmedian(b[ib], axis=1))
    d = np.concatenate(diffs)
    tail = (1 - CONFIDENCE) / 2 * 100
    return np.nanpercentile(d, tail, axis=0), np.nanpercentile(d, 100 - tail, axis=0)
