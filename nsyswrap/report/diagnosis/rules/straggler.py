"""Rule straggler: the rank the others wait for, by its lag at the collectives (the
stragglers table), when the run has no what-if replay; with one, rule slow_rank says what
fixing that rank saves and tells this lag beside it (`lag_of`)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from nsyswrap.report.diagnosis.facts import Facts
from nsyswrap.report.diagnosis.finding import Finding, no_saving
from nsyswrap.report.diagnosis.persistence import episodes
from nsyswrap.report.diagnosis.rule import Limits, Rule
from nsyswrap.report.diagnosis.words import capital, ms, ranks
from nsyswrap.report.figures import COUNT, FRACTION, NS, figure, value

NO_STEPS = "no step ranges to compare with"
MPI_WAIT = (
    "the collectives are MPI calls on the host: a wait in one blocks the host, not "
    "the GPU's communication"
)
ARRIVES = (
    "arrives last at {last} of {collectives} collectives, {lag} {basis} after "
    "{whom}{over_steps}{lag_phase}."
)
MEDIAN = "the median rank"
# of two ranks the median is their midpoint: the gap to the other is said first, the lag
# after their midpoint is the labelled figure beside it
GAP = "rank {other} (the gap; after their midpoint, the median of two ranks: {mid})"
AGAINST = " against rank {other},"
OVER_STEPS = (
    " (over {n} steps: each group's first collective, which holds the ranks' start-up "
    "skew, is left out)"
)
LAG_IN = "; its lag is in `{phase}` (+{excess}{against} {basis})"
LAG_MOST = "; of its phase ranges, `{phase}` lags the most (+{excess}{against} {basis})"
WAIT = " {who} {verb} {wait} {basis}{each} for it in {where}{part}{exposed}."
PART_OF_MPI = ": {share:.0%} of {their} MPI time"
MPI_BLOCKS = (
    "; a wait inside an MPI call blocks the host, not the GPU, so it is not part of "
    "{their} GPU's exposed communication"
)
PART_OF_COLLECTIVES = ": {share:.0%} of {their} {kind}time in those collectives"
PART_OF_EXPOSED = ", {share:.0%} of {their} exposed communication ({exposed} {basis}{each})"
ALL_EXPOSED = (
    ", more than {their} exposed communication ({exposed} {basis}{each}), so all of it is waiting"
)
TEXT = "Rank {rank} is the straggler: it {arrives}{waiting}"
# late in some steps only: the word the replay's findings use (rule slow_rank)
SOME_STEPS = "Rank {rank} is slow in some steps: it {arrives}{waiting}"
IDS = ("straggler", "intermittent")  # by the persistence of its slow steps
ADVICE_PHASE = (
    "Make `{phase}` on rank {rank} as fast as on the others (+{excess}{against} {basis}{now}); "
    "every other rank waits for it in the next collective."
)
ADVICE = (
    "Find what makes rank {rank} slower (`nsyswrap query crossrank.stragglers`): the others "
    "wait for it in every collective."
)


@dataclass(frozen=True)
class Lag:
    """The straggler's figures. Every per-step figure is divided by the steps it sums:
    its lag and the wait it imposes by the steps of the stragglers table (a group's first
    collective, which holds the ranks' start-up skew, is left out, so a step whose only
    collective that is has no row), its phase excess by the steps that excess sums, the
    others' exposed communication by each device's steps."""

    rank: int
    row: dict  # the stragglers table's row of every step
    n: int  # the steps it is over
    basis: str
    lag: float
    first_gap: float  # its lag behind the first arrival, per step (of two ranks: the gap)
    others: list[int]  # the ranks that wait for it
    wait: float  # each of them, per step
    in_collectives: float  # their time in collectives, per step (>= wait)
    exposed: float  # their exposed communication, per step (0: none or on the host)
    on_host: bool  # the collectives are MPI calls
    host_timed: bool  # the collectives are timed on the host (gloo, MPI)
    skipped: bool  # a step of the window has no row (its only collective left out)
    other: int | None  # of two ranks, the other: its gap to it is said
    phase: str | None
    phase_steps: int
    excess: float
    late: bool  # the phase excess is over the steps where it is late only
    where: str  # the collectives' ops
    kind: str  # persistent or intermittent (episodes_of), the finding's id by IDS

    @property
    def phase_basis(self) -> str:
        return "per step where it is late" if self.late else self.basis

    @property
    def gap(self) -> float:
        """Its lag as said: of two ranks the gap to the other (its lag behind the first
        arrival), else after the median rank; each instant counted once."""
        return self.first_gap if self.other is not None else self.lag

    @property
    def phase_gap(self) -> float:
        """Its phase excess as said: of two ranks against the other (twice the excess)."""
        return 2 * self.excess if self.other is not None else self.excess

    @property
    def against(self) -> str:
        return AGAINST.format(other=self.other) if self.other is not None else ""

    def arrives(self, lag_phase: str = LAG_IN) -> str:
        """`arrives last at 9 of 10 collectives, ...`; `lag_phase` words its phase."""
        whom = (
            GAP.format(other=self.other, mid=f"{ms(self.lag)} {self.basis}")
            if self.other is not None
            else MEDIAN
        )
        return ARRIVES.format(
            last=value(self.row["last"], 0),
            collectives=value(self.row["collectives"], 0),
            lag=ms(self.gap),
            basis=self.basis,
            whom=whom,
            over_steps=OVER_STEPS.format(n=self.n) if self.skipped else "",
            lag_phase=lag_phase.format(
                phase=self.phase,
                excess=ms(self.phase_gap),
                against=self.against,
                basis=self.phase_basis,
            )
            if self.phase
            else "",
        )

    def waiting(self, per_rank: int) -> str:
        """` Ranks 0, 1 and 3 wait 1.00 ms per step each for it in all_reduce: ...`."""
        if not self.others:
            return ""
        one = len(self.others) == 1
        their, each = ("its", "") if one else ("their", " each")  # each: the waiting ranks' mean
        if self.on_host:
            part = (
                PART_OF_MPI.format(share=self.wait / self.in_collectives, their=their)
                if self.in_collectives
                else ""
            ) + MPI_BLOCKS.format(their=their)
        elif self.in_collectives:
            kind = "" if self.host_timed else "NCCL "
            part = PART_OF_COLLECTIVES.format(
                share=self.wait / self.in_collectives, their=their, kind=kind
            )
        else:
            part = ""
        return WAIT.format(
            who=capital(ranks(self.others, of=per_rank)),
            verb="waits" if one else "wait",
            wait=ms(self.wait),
            basis=self.basis,
            each=each,
            where=self.where,
            part=part,
            exposed=self._exposed(their, each),
        )

    def _exposed(self, their: str, each: str) -> str:
        if not self.exposed:
            return ""
        said = {"their": their, "exposed": ms(self.exposed), "basis": self.basis, "each": each}
        if self.wait < self.exposed:
            return PART_OF_EXPOSED.format(share=min(self.wait / self.exposed, 1), **said)
        return ALL_EXPOSED.format(**said)

    def evidence(self) -> dict:
        on_host, n = self.on_host, self.n
        gap = (
            {
                "gap_to": self.other,
                "gap_per_step": figure(self.gap, NS),
                "phase_gap_per_step": figure(self.phase_gap, NS),
            }
            if self.other is not None
            else {}
        )
        return {
            "rank": self.rank,
            "phase": self.phase,
            "lag_per_step": figure(self.lag, NS),
            "phase_excess_per_step": figure(self.excess, NS),
            "waiting_ranks": self.others,
            "wait_per_step": figure(self.wait, NS),
            "share_of_nccl_time": figure(
                self.wait / self.in_collectives if self.in_collectives and not on_host else None,
                FRACTION,
                MPI_WAIT if on_host else "no time in collectives",
            ),
            "share_of_exposed_comm": figure(
                min(self.wait / self.exposed, 1) if self.exposed else None,
                FRACTION,
                MPI_WAIT if on_host else "no exposed communication",
            ),
            "exposed_comm_per_step": figure(self.exposed, NS),
            "steps": figure(n, COUNT),
            "phase_steps": figure(self.phase_steps, COUNT),
            **gap,
        }


def _mpi_only(facts: Facts) -> bool:
    """Whether every matched collective is an MPI call (found by MPI ranges, timed on the
    host) rather than NCCL work on the GPU."""
    found = {
        r["found_by"] for r in facts.rows("crossrank", "groups") if r.get("status") == "matched"
    }
    return bool(found) and all(f.startswith("MPI") for f in found)


def _host_timed(facts: Facts) -> bool:
    """Whether the collectives are timed on the host (gloo, MPI: no rank has NCCL kernels)."""
    sources = {r["source"] for r in facts.rows("crossrank", "clock_offsets") if r["source"]}
    return bool(sources) and "kernel" not in sources


def _their_time(facts: Facts, others: list[int], steps: set, n: int, on_host: bool):
    """(the waiting ranks' time in collectives, their exposed communication), per step."""
    inside = [
        value(r["in_collectives"], 0)
        for r in facts.rows("crossrank", "comm_split")
        if r["rank"] in others and r["step"] in steps
    ]
    in_collectives = sum(inside) / len(others) / n if others else 0.0
    keys = [] if on_host else [k for k in facts.totals if k[0] in others]
    exposed = (
        statistics.fmean(facts.per_step(k, facts.totals[k].exposed_comm_ns)[0] for k in keys)
        if keys
        else 0.0
    )
    return in_collectives, exposed


def episodes_of(total: dict, observed: list[int]) -> dict | None:
    """The straggler's slow steps (its phase's slow_steps, else the affected_steps where
    the others waited for it) over the `observed` steps: persistent or intermittent and
    where (nsyswrap.report.diagnosis.persistence); None without any."""
    said = total.get("slow_steps") or total.get("affected_steps")
    return episodes([int(s) for s in said.split(",")], observed) if said and observed else None


def lag_of(facts: Facts) -> Lag | None:
    """The straggler's figures, where the cross-rank section names one (its own verdict)."""
    v = facts.verdict("crossrank") or {}
    strag = facts.rows("crossrank", "stragglers")
    total = next((r for r in strag if r["step"] == "all"), None)
    if not str(v.get("label") or "").startswith("straggler") or total is None:
        return None
    lag_steps = {r["step"] for r in strag if r["step"] != "all"}
    n, basis = (len(lag_steps), "per step") if lag_steps else (1, "over the run")
    others = sorted(r for r, w in facts.waited.items() if r != total["rank"] and w > 0)
    on_host = _mpi_only(facts)
    in_collectives, exposed = _their_time(facts, others, lag_steps or {"all"}, n, on_host)
    phase_steps = value(total.get("phase_steps"), 0) if lag_steps else 1
    ops = sorted({r["op"] for r in facts.rows("crossrank", "bandwidth")})
    all_steps = {s for steps in facts.steps.values() for s, _ in steps}
    return Lag(
        rank=total["rank"],
        row=total,
        n=n,
        basis=basis,
        lag=value(total["lag"], 0) / n,
        first_gap=value(total["gap"], 0) / n,
        others=others,
        wait=value(total["imposed_wait"], 0) / len(others) / n if others else 0.0,
        in_collectives=in_collectives,
        exposed=exposed,
        on_host=on_host,
        host_timed=_host_timed(facts),
        skipped=bool(lag_steps and len(all_steps - lag_steps)),
        other=next((r for r in facts.waited if r != total["rank"]), None)
        if len(facts.waited) == 2
        else None,
        phase=total.get("phase"),
        phase_steps=phase_steps,
        excess=value(total.get("phase_excess"), 0) / (phase_steps or n),
        late=0 < phase_steps < len(lag_steps),
        where=" and ".join(ops) if ops else "MPI collectives" if on_host else "collectives",
        kind=(episodes_of(total, sorted(lag_steps)) or {"kind": "persistent"})["kind"],
    )


def find(facts: Facts, limits: Limits) -> list[Finding]:
    """The straggler by its lag, where the run has no replay to size what fixing it saves."""
    lag = None if facts.replayed else lag_of(facts)
    if lag is None:
        return []
    step_ns = facts.median_step()
    advice = (
        ADVICE_PHASE.format(
            phase=lag.phase,
            rank=lag.rank,
            excess=ms(lag.phase_gap),
            against=lag.against,
            basis=lag.phase_basis,
            now="" if lag.late else " now",
        )
        if lag.phase
        else ADVICE.format(rank=lag.rank)
    )
    some = lag.kind == "intermittent"
    kind = IDS[some]
    return [
        Finding(
            id=kind,
            scope="cross-rank",
            label=f"{kind}: rank {lag.rank}",
            ranks=(lag.rank,),
            cost=figure(lag.gap, NS),
            cost_basis=lag.basis,
            share=figure(lag.gap / step_ns if step_ns else None, FRACTION, NO_STEPS),
            text=(SOME_STEPS if some else TEXT).format(
                rank=lag.rank, arrives=lag.arrives(), waiting=lag.waiting(len(facts.per_rank))
            ),
            advice=advice,
            evidence=lag.evidence(),
            saving=no_saving(facts.replayed),
        )
    ]


RULE = Rule(
    id="straggler",
    kind="finding",
    order="saving",
    doc="""The straggler, where the cross-rank section names one and the run has no what-if
replay: the rank that arrives last at the collectives, its lag per step after the median
rank (of two ranks, the gap to the other, with the lag after their midpoint beside it as a
labelled figure), each the union per step of its late spans (collectives outstanding
together, such as DDP's gradient buckets, counted once), the phase range it lags in (of two
ranks, its excess against the other), and the wait it imposes on the others per step,
with how much of their time in collectives and of their exposed communication that is
(for MPI collectives, of their MPI time: a wait blocks the host, not the GPU). Its cost is
its lag after the median rank (of two ranks, its gap to the other: their midpoint is no
rank to be as fast as): the others' waiting is a figure beside it, not what fixing it
saves. A rank late in at most half of the steps (its phase's slow steps, else the
steps the others waited for it) is slow in some steps (id intermittent, the word of the
replay's findings), else the straggler.""",
    find=find,
)
