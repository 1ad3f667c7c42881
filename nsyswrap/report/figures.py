"""Figures: every number in a report carries its unit, and a missing one says why."""
from __future__ import annotations

import math

NS, FRACTION, COUNT, BYTES = "ns", "fraction", "count", "bytes"


def figure(value, unit: str, reason: str | None = None) -> dict:
    """`{"value": v, "unit": u}`; a missing value (None/NaN) becomes null plus a reason."""
    if value is None or _isna(value):
        return missing(unit, reason or "not computed")
    if hasattr(value, "item"):  # numpy / pandas scalar
        value = value.item()
    if isinstance(value, float) and value.is_integer() and unit in (NS, COUNT):
        value = int(value)
    return {"value": value, "unit": unit}


def missing(unit: str, reason: str) -> dict:
    """A figure that cannot be computed, with the reason."""
    return {"value": None, "unit": unit, "reason": reason}


def share(part, whole, reason: str) -> dict:
    """part / whole as a fraction, or null with `reason` when whole is 0 or missing."""
    if part is None or not whole:
        return missing(FRACTION, reason)
    return figure(float(part) / float(whole), FRACTION)


def is_figure(obj) -> bool:
    return isinstance(obj, dict) and "unit" in obj and "value" in obj


def _isna(value) -> bool:
    """NaN, pandas NA or NaT (pandas is imported only when a value might be one)."""
    if isinstance(value, float):
        return math.isnan(value)
    if isinstance(value, (int, str)):
        return False
    import pandas as pd

    return bool(pd.isna(value))
