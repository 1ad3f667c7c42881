"""The alpha-beta model of a collective: transfer_ns = latency_ns + bytes / bandwidth."""

from __future__ import annotations

import numpy as np
import pandas as pd

COLUMNS = ["op", "collectives", "sizes", "latency_ns", "bandwidth_gb_per_s", "r2"]


def fit_alpha_beta(collectives: pd.DataFrame) -> pd.DataFrame:
    """Least-squares fit per op over matched collectives with known bytes.

    `collectives` has one row per (pg, seq, rank) as crossrank.collectives gives;
    each collective counts once, with its transfer time. An op needs two payload
    sizes for a fit; otherwise latency and bandwidth are NaN. Bandwidth is in
    GB/s (bytes per ns); NaN too when the slope is not positive.
    """
    points = collectives.dropna(subset=["bytes"]).drop_duplicates(["pg", "seq"])
    rows = []
    for op, group in points.groupby("op", sort=True):
        x = group["bytes"].to_numpy(float)
        y = group["transfer_ns"].to_numpy(float)
        row = {
            "op": op,
            "collectives": len(group),
            "sizes": len(np.unique(x)),
            "latency_ns": np.nan,
            "bandwidth_gb_per_s": np.nan,
            "r2": np.nan,
        }
        if row["sizes"] >= 2:
            slope, intercept = np.polyfit(x, y, 1)
            residual = y - (intercept + slope * x)
            spread = ((y - y.mean()) ** 2).sum()
            row.update(latency_ns=intercept, r2=1 - (residual**2).sum() / spread if spread else 1.0)
            if slope > 0:
                row["bandwidth_gb_per_s"] = 1 / slope
        rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)
