"""Rule hot_expert: a slow rank of an MoE run whose experts get more tokens than the
others' (it sends much more in all_to_all): rule slow_rank says so and advises balancing
the routing."""

from __future__ import annotations

from nsyswrap.report.diagnosis.facts import Facts
from nsyswrap.report.diagnosis.rule import Limits, Rule, Threshold
from nsyswrap.report.diagnosis.words import ms
from nsyswrap.report.figures import value

SENTENCE = (
    " It sends {times:.1f}x the median rank's bytes in {op}: the experts on it get more "
    "tokens than the others' (a hot expert)."
)
ADVICE = (
    "Balance the tokens routed to rank {rank}'s experts (a load-balancing loss, a capacity "
    "factor, or the hot expert replicated or placed elsewhere): making rank {rank}'s work as "
    "fast as the others' saves {gain} per step; the shorter {op} transfers of a balanced "
    "routing come on top (the trace holds each rank's total bytes, not what it sends to "
    "each peer, so the replay cannot size them)."
)


def hot_exchange(facts: Facts, rank: int, limits: Limits | None = None) -> dict | None:
    """The exchange_bytes row of `rank` that sends at least hot_exchange_x the median rank's
    bytes in an all_to_all op (the most, if several), else None."""
    x = limits or RULE.limits()
    mine = [
        r
        for r in facts.rows("crossrank", "exchange_bytes")
        if r["rank"] == rank and value(r["vs_median"], 0) >= x.hot_exchange_x
    ]
    return max(mine, key=lambda r: value(r["vs_median"]), default=None)


def words(rank: int, gain: float, hot: dict) -> tuple[str, str]:
    """(sentence, advice) of slow rank `rank`, whose fix saves `gain` per step, that sends
    `hot` (its exchange_bytes row) in all_to_all."""
    op = hot["op"]
    sentence = SENTENCE.format(times=value(hot["vs_median"]), op=op)
    return sentence, ADVICE.format(rank=rank, gain=ms(gain), op=op)


RULE = Rule(
    id="hot_expert",
    kind="advice",
    doc="""A slow rank that sends at least {hot_exchange_x} the median rank's bytes in an
all_to_all op (table exchange_bytes) runs experts that get more tokens than the others'
(a hot expert): its finding says so, and its advice is to balance the tokens routed to
its experts (a load-balancing loss, a capacity factor, the hot expert replicated or placed
elsewhere), which saves what making its work as fast as the others' saves, and more.""",
    thresholds=(
        Threshold(
            "hot_exchange_x",
            1.25,
            "a slow rank sending this x the median rank's all_to_all bytes runs a hot expert",
            "x",
        ),
    ),
)
