"""The facts the rules read: built once from a report's finished sections (their stable
table ids and columns, never SQL), and never written.

`Facts.of(report)` reads, per (rank, device) of the single-rank ledger, its `Totals`
(ledger and idle-gap time), its GPU activities, its steps and the physical GPU it is; per
rank its waits in collectives; the frameworks the trace saw; the window; the replay's
candidate fixes. Rules read any other table through `rows(section, table)`. `labels` (per
device) and `causes` (what the replay names) are facts decided by a rule once (rules
device_label and replay_causes), then read by the others.

Step statistics leave out the steps the window set apart (warm-up and outliers:
nsyswrap.report.window); figures are per step only over a window of steps (not the whole
capture, not an NVTX window).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from nsyswrap.report.figures import rows as table_rows
from nsyswrap.report.figures import section, value

HOST_CAUSES = ("host_bound", "sync")
Key = tuple[int, int]  # (rank, device)


@dataclass
class Totals:
    """Ledger and gap time (ns) of one device, or summed over several."""

    span_ns: int = 0
    compute_busy_ns: int = 0
    comm_busy_ns: int = 0
    both_ns: int = 0
    exposed_comm_ns: int = 0
    copy_only_ns: int = 0
    idle_ns: int = 0
    compute_sum_ns: int = 0
    comm_sum_ns: int = 0
    gap_ns: dict[str, int] = field(default_factory=dict)

    def __add__(self, other: Totals) -> Totals:
        gaps = dict(self.gap_ns)
        for cause, ns in other.gap_ns.items():
            gaps[cause] = gaps.get(cause, 0) + ns
        numbers = {k: getattr(self, k) + getattr(other, k) for k in _NUMBERS}
        return Totals(**numbers, gap_ns=gaps)

    def share(self, ns: int) -> float:
        return ns / self.span_ns if self.span_ns else 0.0

    def scaled(self, factor: float) -> Totals:
        """Every time times `factor` (e.g. per GPU and per step); shares stay."""
        return Totals(
            **{k: getattr(self, k) * factor for k in _NUMBERS},
            gap_ns={c: ns * factor for c, ns in self.gap_ns.items()},
        )

    @property
    def host_idle_ns(self) -> int:
        return sum(self.gap_ns.get(c, 0) for c in HOST_CAUSES)


_NUMBERS = [k for k in Totals.__dataclass_fields__ if k != "gap_ns"]


def _frozen(mapping: dict) -> Mapping:
    return MappingProxyType(mapping)


@dataclass(frozen=True)
class Facts:
    """What the rules read of one report dict (module doc)."""

    report: Mapping
    totals: Mapping[Key, Totals]
    activities: Mapping[Key, int]
    set_apart: frozenset[int]
    steps: Mapping[Key, tuple[tuple[int, int], ...]]  # every step in the window: (step, ns)
    usual: Mapping[Key, tuple[tuple[int, int], ...]]  # what step statistics are of
    of_steps: bool
    waited: Mapping[int, int]
    in_collectives: Mapping[int, int]
    per_rank: Mapping[int, int]  # devices per rank
    frameworks: frozenset[str]
    fixes: tuple[dict, ...]  # crossrank.whatif's rows: the replay's candidate fixes
    gpus: Mapping[Key, int] = field(default_factory=lambda: _frozen({}))  # the physical GPU
    labels: Mapping[Key, dict] = field(default_factory=lambda: _frozen({}))
    causes: tuple[dict, ...] = ()

    @classmethod
    def of(cls, report: dict) -> Facts:
        window = report.get("window") or {}
        set_apart = frozenset(o["step"] for o in window.get("outliers", []) if o.get("set_apart"))
        steps: dict[Key, list[tuple[int, int]]] = {}
        for r in table_rows(report, "single_rank", "steps"):
            steps.setdefault((r["rank"], r["device"]), []).append(
                (r["step"], value(r["duration"], 0))
            )
        totals = _totals(report)
        per_rank: dict[int, int] = {}
        for rank, _ in totals:
            per_rank[rank] = per_rank.get(rank, 0) + 1
        return cls(
            report=report,
            totals=_frozen(totals),
            activities=_frozen(
                {
                    (r["rank"], r["device"]): value(r["activities"], 0)
                    for r in table_rows(report, "trace", "activity")
                }
            ),
            set_apart=set_apart,
            steps=_frozen({k: tuple(v) for k, v in steps.items()}),
            usual=_frozen(
                {k: tuple((s, d) for s, d in v if s not in set_apart) for k, v in steps.items()}
            ),
            of_steps=_of_steps(report, window),
            waited=_frozen(
                {
                    r["rank"]: value(r["waited"], 0)
                    for r in table_rows(report, "crossrank", "rank_waits")
                }
            ),
            in_collectives=_frozen(
                {
                    r["rank"]: value(r["in_collectives"], 0)
                    for r in table_rows(report, "crossrank", "comm_split")
                    if r["step"] == "all"
                }
            ),
            per_rank=_frozen(per_rank),
            frameworks=frozenset(r["framework"] for r in table_rows(report, "trace", "frameworks")),
            fixes=tuple(table_rows(report, "crossrank", "whatif")),
            gpus=_frozen(
                {(r["rank"], r["device"]): r["gpu"] for r in table_rows(report, "trace", "gpus")}
            ),
        )

    def decided(self, **found) -> Facts:
        """These facts with `labels` or `causes` decided (by their rules)."""
        if "labels" in found:
            found["labels"] = _frozen(dict(found["labels"]))
        return replace(self, **found)

    def rows(self, section_id: str, table_id: str) -> list[dict]:
        """The rows of a table of the report ([] when absent)."""
        return table_rows(self.report, section_id, table_id)

    def verdict(self, section_id: str) -> dict | None:
        """A section's own verdict, as it was built."""
        return section(self.report, section_id).get("verdict")

    @property
    def window(self) -> Mapping:
        return self.report.get("window") or {}

    @property
    def replayed(self) -> bool:
        """Whether the what-if replay ran and found candidate fixes."""
        return bool(self.fixes)

    def step_count(self, key: Key) -> int:
        """The steps a window of steps holds, to divide its figures by (0: not one)."""
        return len(self.steps.get(key, ())) if self.of_steps else 0

    def per_step(self, key: Key, ns: float) -> tuple[float, str]:
        """(ns per step, basis) over a window of steps, else (ns over the span, basis)."""
        n = self.step_count(key)
        return (ns / n, "per step") if n else (ns, "over the span")

    def per_gpu_step(self, keys: list[Key]) -> tuple[Totals, float, str]:
        """The devices' totals as one GPU's per step (over the span without steps), the
        factor and the basis (as per_step's)."""
        n = self.step_count(keys[0])
        factor = 1 / (len(keys) * (n or 1))
        group = sum((self.totals[k] for k in keys), Totals())
        return group.scaled(factor), factor, "per step" if n else "over the span"

    def unit(self, keys: list[Key]) -> str:
        """What a mean over the devices `keys` is per: `GPU` where each is a GPU of its own,
        `rank` where ranks share a physical GPU (trace.gpus: two ranks on one GPU are not
        two GPUs, and their mean is per rank)."""
        physical = {self.gpus.get(k, k) for k in keys}
        return "GPU" if len(physical) == len(keys) else "rank"

    def median_step(self) -> float:
        """The median duration of the usual steps of every device (0 without steps)."""
        durations = [d for steps in self.usual.values() for _, d in steps]
        return statistics.median(durations) if durations else 0.0


def _totals(report: dict) -> dict[Key, Totals]:
    gaps: dict[Key, dict[str, int]] = {}
    for r in table_rows(report, "single_rank", "idle_gaps"):
        gaps.setdefault((r["rank"], r["device"]), {})[r["cause"]] = value(r["total"], 0)
    return {
        (r["rank"], r["device"]): Totals(
            span_ns=value(r["span"], 0),
            compute_busy_ns=value(r["compute_busy"], 0),
            comm_busy_ns=value(r["comm_busy"], 0),
            both_ns=value(r["both"], 0),
            exposed_comm_ns=value(r["comm_only"], 0),
            copy_only_ns=value(r["copy_only"], 0),
            idle_ns=value(r["idle"], 0),
            gap_ns=gaps.get((r["rank"], r["device"]), {}),
        )
        for r in table_rows(report, "single_rank", "ledger")
    }


def _of_steps(report: dict, window: dict) -> bool:
    """Whether figures are per step: only over a window of steps (not the whole capture,
    not NVTX)."""
    return window.get("source") in (None, "steps") or (
        window.get("source") == "given"
        and not (report.get("options") or {}).get("window_nvtx")
        and (window.get("step_from"), window.get("step_to")) != (None, None)
    )
