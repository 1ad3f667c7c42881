"""The report's document: its sections, with the diagnosis' decisions where the report's
layout shows them, and the diagnosis (the JSON of `nsyswrap report --format json`).

The sections are built first and the diagnosis reads them (nsyswrap.report.diagnosis); it
never writes into them. What it decides is then shown where a reader looks for it, so
that no part of the report contradicts another: each GPU's label in the single-rank
section's `shares` table (column `verdict`), the run's label as that section's verdict
(with the device findings' advice first among its recommendations, none where it is not
enough data) and the cross-rank section's verdict.
"""

from __future__ import annotations

from nsyswrap.report.diagnosis import Diagnosis, decide
from nsyswrap.report.diagnosis.rules.device_label import NOT_ENOUGH


def finish(report: dict) -> dict:
    """`report` (its sections built) with the diagnosis, and its decisions placed."""
    d = decide(report)
    return {**report, "sections": placed(report["sections"], d), "diagnosis": d.as_json()}


def placed(sections: list[dict], d: Diagnosis) -> list[dict]:
    """The sections with `d`'s decisions where the layout shows them (module doc)."""
    out = []
    for s in sections:
        if s["id"] == "single_rank":
            s = _single_rank(s, d)
        elif s["id"] == "crossrank" and d.crossrank_label is not None:
            s = {**s, "verdict": d.crossrank_label}
        out.append(s)
    return out


def _single_rank(s: dict, d: Diagnosis) -> dict:
    labels = d.facts.labels
    tables = [
        {
            **t,
            "rows": [
                {**r, "verdict": labels[(r["rank"], r["device"])]["label"]} for r in t["rows"]
            ],
        }
        if t["id"] == "shares"
        else t
        for t in s["tables"]
    ]
    advice = d.device_advice + s.get("recommendations", [])
    if d.run_label["label"] == NOT_ENOUGH:
        advice = []
    return {**s, "verdict": d.run_label, "recommendations": advice, "tables": tables}
