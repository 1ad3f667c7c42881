"""Rule device_label: each GPU's verdict, decided once; the report's tables, its page and
its JSON all show this one."""

from __future__ import annotations

from nsyswrap.report.diagnosis.facts import Facts, Key, Totals
from nsyswrap.report.diagnosis.rule import Limits, Rule, Threshold
from nsyswrap.report.diagnosis.words import ms

NOT_ENOUGH = "not enough data"
LABELS = (
    "compute-bound",
    "communication-bound",
    "copy-bound",
    "host-bound",
    "waiting-for-peers",
    "balanced",
    NOT_ENOUGH,
)
EMPTY = "the analysed window is empty"
FEW_ACTIVITIES = (
    "only {activities} GPU activities (kernels, copies, sets); a verdict needs at least {least}"
)
SHORT_SPAN = "the span is {span_us:,.1f} us; a verdict needs at least {least_us:g} us"
SHARES = (
    "compute runs {compute:.0%}, exposed communication {exposed:.0%}, copies alone "
    "{copies:.0%}, idle {idle:.0%} of the time"
)
HOST_CAUSED = "{shares}; the host caused {host:.0%} of the idle time"
NO_CAUSE = "{shares}; no single cause dominates"
WAITING = (
    "it waits {waited} in collectives for slower ranks, {share:.0%} of its time in them; {reason}"
)


def verdict(t: Totals, activities: int | None = None, limits: Limits | None = None) -> dict:
    """{"label": one of LABELS or null, "reason"} of the shares of `t` (one device's, or
    several summed); `activities`: the GPU activities behind `t` when known."""
    x = limits or RULE.limits()
    if t.span_ns <= 0:
        return {"label": None, "reason": EMPTY}
    if activities is not None and activities < x.min_activities:
        reason = FEW_ACTIVITIES.format(activities=activities, least=x.min_activities)
        return {"label": NOT_ENOUGH, "reason": reason}
    if t.span_ns < x.min_span_ns:
        reason = SHORT_SPAN.format(span_us=t.span_ns / 1e3, least_us=x.min_span_ns / 1e3)
        return {"label": NOT_ENOUGH, "reason": reason}
    exposed, idle = t.share(t.exposed_comm_ns), t.share(t.idle_ns)
    compute, copies = t.share(t.compute_busy_ns), t.share(t.copy_only_ns)
    shares = SHARES.format(compute=compute, exposed=exposed, copies=copies, idle=idle)
    if exposed >= x.exposed_comm_share and exposed >= idle and exposed >= copies:
        return {"label": "communication-bound", "reason": shares}
    if copies >= x.copy_only_share and copies >= idle and copies >= exposed:
        return {"label": "copy-bound", "reason": shares}
    if idle >= x.idle_share and t.host_idle_ns >= x.host_caused_share * t.idle_ns:
        reason = HOST_CAUSED.format(shares=shares, host=t.host_idle_ns / t.idle_ns)
        return {"label": "host-bound", "reason": reason}
    if compute >= x.compute_share:
        return {"label": "compute-bound", "reason": shares}
    return {"label": "balanced", "reason": NO_CAUSE.format(shares=shares)}


def label(
    t: Totals, activities: int | None, waited: int, inside: int, limits: Limits | None = None
) -> dict:
    """The verdict of one device of a rank that `waited` ns in collectives for slower
    ranks, of the `inside` ns it spent in them (both 0 without cross-rank waits)."""
    x = limits or RULE.limits()
    v = verdict(t, activities, x)
    if (
        v["label"] in ("communication-bound", "balanced")
        and t.comm_busy_ns
        and waited >= x.peer_wait_share * t.comm_busy_ns
        and t.exposed_comm_ns >= x.exposed_wait_share * t.span_ns
    ):
        reason = WAITING.format(
            waited=ms(waited), share=waited / max(inside, waited), reason=v["reason"]
        )
        return {"label": "waiting-for-peers", "reason": reason}
    return v


def find(facts: Facts, limits: Limits) -> dict[Key, dict]:
    """Every device's label, in the ledger's order."""
    return {
        key: label(
            t,
            facts.activities.get(key),
            facts.waited.get(key[0], 0),
            facts.in_collectives.get(key[0], 0),
            limits,
        )
        for key, t in facts.totals.items()
    }


RULE = Rule(
    id="device_label",
    kind="label",
    doc="""Each GPU's verdict, from shares of its span (the window's time):
communication-bound when exposed communication is at least {exposed_comm_share} and at least
the copy and idle shares; copy-bound when copies with nothing else running are at least
{copy_only_share} and at least the exposed communication and idle shares; host-bound when
idle is at least {idle_share}, at least {host_caused_share} of it caused by the host (gaps
of cause host_bound or sync); compute-bound when compute runs at least {compute_share}; else
balanced. Below what a verdict needs, not enough data: fewer than {min_activities} GPU
activities (kernels, copies, sets) or a span under {min_span_ns}. A GPU whose exposed
communication is mostly waiting for a slower rank (its rank's waits in collectives at
least {peer_wait_share} of its NCCL time, its exposed communication at least
{exposed_wait_share} of the span) is waiting-for-peers, never communication-bound.""",
    thresholds=(
        Threshold(
            "exposed_comm_share", 0.15, "communication-bound: the least exposed communication"
        ),
        Threshold("copy_only_share", 0.30, "copy-bound: the least time of copies alone"),
        Threshold("idle_share", 0.15, "host-bound: the least idle time"),
        Threshold(
            "host_caused_share", 0.5, "host-bound: the least part of the idle the host causes"
        ),
        Threshold("compute_share", 0.70, "compute-bound: the least time compute runs"),
        Threshold("min_activities", 10, "a verdict needs this many GPU activities", "count"),
        Threshold("min_span_ns", 100_000, "a verdict needs a span this long", "ns"),
        Threshold(
            "peer_wait_share",
            0.5,
            "waiting-for-peers: the least share of the NCCL time its rank waits in collectives",
        ),
        Threshold(
            "exposed_wait_share",
            0.05,
            "waiting-for-peers: the least exposed communication, of the span",
        ),
    ),
    find=find,
)
