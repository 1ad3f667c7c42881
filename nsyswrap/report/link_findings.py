"""The diagnosis' finding of a slow link between hosts (the cross-rank section's `links`
table, crossrank.links): its bandwidth against the run's inside a host and a healthy link's,
and what the replay saves with it at the healthy bandwidth; ranked with the other replayed
findings by that saving."""

from __future__ import annotations

from nsyswrap.report.figures import FRACTION, NS, figure, rows, value
from nsyswrap.report.verdict import ms

MIN_GAIN_SHARE = 0.01  # a slow link whose fix saves less than this of a step is not named


def link_findings(report: dict) -> list[dict]:
    """One finding per slow link whose healthy bandwidth saves at least MIN_GAIN_SHARE of
    the step, largest saving first."""
    slow = [
        r
        for r in rows(report, "crossrank", "links")
        if r["slow"] and value(r["gain_pct"], 0) >= 100 * MIN_GAIN_SHARE
    ]
    return [_finding(r) for r in sorted(slow, key=lambda r: -value(r["gain_ns_per_step"], 0))]


def _finding(link: dict) -> dict:
    a, b = link["host_a"], link["host_b"]
    gain, pct = value(link["gain_ns_per_step"], 0), value(link["gain_pct"], 0)
    bw, healthy = value(link["busbw"]), value(link["healthy"])
    inside = value(link["inside"])
    against = f"against {inside:,.1f} GB/s inside a host and " if inside is not None else "against "
    return {
        "id": "slow-link",
        "scope": "cross-rank",
        "label": f"slow link: {a} - {b}",
        "ranks": [],
        "cost": figure(gain, NS),
        "cost_basis": "per step",
        "share": figure(pct / 100, FRACTION),
        "text": f"The link between hosts {a} and {b} runs at {bw:,.1f} GB/s (bus bandwidth of "
        f"the {value(link['collectives'], 0)} collectives across it), {against}"
        f"{value(link['expected']):,.0f} GB/s or more for a healthy link between hosts: at "
        f"{healthy:,.1f} GB/s each step would be {ms(gain)} shorter ({pct:.0f} % of the step "
        "time, replayed).",
        "recommendation": f"Check the network between {a} and {b} (each NIC's link speed and "
        "errors, the switch ports, the interface NCCL uses: NCCL_IB_HCA, "
        f"NCCL_SOCKET_IFNAME, NCCL_DEBUG=INFO): at {healthy:,.1f} GB/s it saves {ms(gain)} "
        "per step.",
        "evidence": {
            "hosts": [a, b],
            "busbw": link["busbw"],
            "inside": link["inside"],
            "expected": link["expected"],
            "healthy": link["healthy"],
            "gain_per_step": figure(gain, NS),
            "gain_share": figure(pct / 100, FRACTION),
        },
    }
