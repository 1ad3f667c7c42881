"""A finding of the diagnosis: one cause of lost step time, its figures and its evidence.

`Finding.as_json()` is the finding as the report's JSON has it (README, "The report as
JSON"): `id`, `scope`, `label`, `ranks` (a cross-rank finding) or `devices` (a device
finding), `cost`, `cost_basis`, `share`, `text`, `recommendation` (the advice), `evidence`,
`gain` (the saving), then the `extra` keys some findings add (`persistence`, `windows`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from nsyswrap.report.figures import FRACTION, NS, figure, missing

SCOPES = ("cross-rank", "device", "run", "samples")
NO_SAVING_REPLAYED = (
    "the replay does not idealise this cause (crossrank.whatif); "
    "its cost is the time it takes, at most what fixing it saves"
)
NO_SAVING_UNREPLAYED = "no what-if replay of this run (see cannot_answer)"


def _frozen(mapping: Mapping | None) -> Mapping:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True)
class Finding:
    """One finding. `cost` is what the cause takes (per `cost_basis`), `share` its share of
    the step (or GPU) time, `saving` what the replay says fixing it saves per step (a
    figure, null with why where the replay does not say); figures are `{value, unit}`
    dicts as everywhere in the report (nsyswrap.report.figures)."""

    id: str
    scope: str
    label: str
    text: str
    cost: dict
    cost_basis: str
    share: dict
    saving: dict
    advice: str | None = None
    evidence: Mapping = field(default_factory=dict)
    ranks: tuple[int, ...] | None = None
    devices: tuple[tuple[int, int], ...] | None = None
    extra: Mapping = field(default_factory=dict)

    def __post_init__(self):
        if self.scope not in SCOPES:
            raise ValueError(f"finding {self.id}: scope {self.scope!r} is not one of {SCOPES}")
        if (self.ranks is None) == (self.devices is None):
            raise ValueError(f"finding {self.id}: give its ranks or its devices")
        object.__setattr__(self, "evidence", _frozen(self.evidence))
        object.__setattr__(self, "extra", _frozen(self.extra))

    def as_json(self) -> dict:
        """The finding in the report's JSON (module doc)."""
        where = (
            {"ranks": list(self.ranks)}
            if self.ranks is not None
            else {"devices": [list(k) for k in self.devices]}
        )
        return {
            "id": self.id,
            "scope": self.scope,
            "label": self.label,
            **where,
            "cost": self.cost,
            "cost_basis": self.cost_basis,
            "share": self.share,
            "text": self.text,
            "recommendation": self.advice,
            "evidence": dict(self.evidence),
            "gain": self.saving,
            **self.extra,
        }


def no_saving(replayed: bool) -> dict:
    """The saving of a finding the replay does not size: null, and why."""
    return figure(None, NS, NO_SAVING_REPLAYED if replayed else NO_SAVING_UNREPLAYED)


def saving_finding(
    id: str,
    label: str,
    ranks: tuple[int, ...],
    gain: float,
    pct: float,
    text: str,
    advice: str | None,
    evidence: Mapping,
) -> Finding:
    """A cross-rank finding whose cost is what its fix saves per step (the replay's `gain`,
    ns, `pct` % of the step time)."""
    return Finding(
        id=id,
        scope="cross-rank",
        label=label,
        ranks=ranks,
        cost=figure(gain, NS),
        cost_basis="per step",
        share=figure(pct / 100, FRACTION),
        text=text,
        advice=advice,
        evidence=evidence,
        saving=figure(gain, NS),
    )


NO_COST = "context: where the time goes is in the findings before it"


def cost_and_share(cost: float | None, share: float | None) -> dict:
    """`cost` and `share` figures of a finding from the compute, memory or host tables
    (null with why for context findings, which cost nothing of their own)."""
    return {
        "cost": figure(cost, NS, NO_COST),
        "share": figure(share, FRACTION) if share is not None else missing(FRACTION, NO_COST),
    }
