"""Rule slow_link: a link between hosts slower than a healthy one (the cross-rank section's
`links` table, crossrank.links): its bandwidth against the run's inside a host and a
healthy link's, and what the replay saves with it at the healthy bandwidth; ranked with
the other replayed findings by that saving."""

from __future__ import annotations

from nsyswrap.report.diagnosis.facts import Facts
from nsyswrap.report.diagnosis.finding import Finding, saving_finding
from nsyswrap.report.diagnosis.rule import Limits, Rule, Threshold
from nsyswrap.report.diagnosis.words import ms
from nsyswrap.report.figures import FRACTION, NS, figure, value

TEXT = (
    "The link between hosts {a} and {b} runs at {bw:,.1f} GB/s (bus bandwidth of the "
    "{collectives} collectives across it), {against}{expected:,.0f} GB/s or more for a "
    "healthy link between hosts: at {healthy:,.1f} GB/s each step would be {gain} shorter "
    "({pct:.0f} % of the step time, replayed)."
)
AGAINST_INSIDE = "against {inside:,.1f} GB/s inside a host and "
AGAINST = "against "
ADVICE = (
    "Check the network between {a} and {b} (each NIC's link speed and errors, the switch "
    "ports, the interface NCCL uses: NCCL_IB_HCA, NCCL_SOCKET_IFNAME, NCCL_DEBUG=INFO): at "
    "{healthy:,.1f} GB/s it saves {gain} per step."
)


def finding(link: dict) -> Finding:
    """The finding of one slow link (a crossrank links row)."""
    a, b = link["host_a"], link["host_b"]
    gain, pct = value(link["gain_ns_per_step"], 0), value(link["gain_pct"], 0)
    healthy, inside = value(link["healthy"]), value(link["inside"])
    against = AGAINST_INSIDE.format(inside=inside) if inside is not None else AGAINST
    return saving_finding(
        "slow-link",
        f"slow link: {a} - {b}",
        (),
        gain,
        pct,
        TEXT.format(
            a=a,
            b=b,
            bw=value(link["busbw"]),
            collectives=value(link["collectives"], 0),
            against=against,
            expected=value(link["expected"]),
            healthy=healthy,
            gain=ms(gain),
            pct=pct,
        ),
        ADVICE.format(a=a, b=b, healthy=healthy, gain=ms(gain)),
        {
            "hosts": [a, b],
            "busbw": link["busbw"],
            "inside": link["inside"],
            "expected": link["expected"],
            "healthy": link["healthy"],
            "gain_per_step": figure(gain, NS),
            "gain_share": figure(pct / 100, FRACTION),
        },
    )


def find(facts: Facts, limits: Limits) -> list[Finding]:
    slow = [
        r
        for r in facts.rows("crossrank", "links")
        if r["slow"] and value(r["gain_pct"], 0) >= 100 * limits.min_gain_share
    ]
    return [finding(r) for r in sorted(slow, key=lambda r: -value(r["gain_ns_per_step"], 0))]


RULE = Rule(
    id="slow_link",
    kind="finding",
    order="saving",
    doc="""A link between hosts whose bandwidth is below a healthy one's (the cross-rank table
links, crossrank.links: slow) is a finding when what the replay saves with it at the
healthy bandwidth is at least {min_gain_share} of a step: its bandwidth, against the
run's inside a host and a healthy link's, what it would save, and what to check on the
network between the two hosts.""",
    thresholds=(
        Threshold("min_gain_share", 0.01, "a slow link is named when it saves this of a step"),
    ),
    find=find,
)
