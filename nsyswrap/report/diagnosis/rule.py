"""A rule of the diagnosis: what it decides, written down once with its thresholds.

A `Rule` is one file of `nsyswrap/report/diagnosis/rules/`: an `id`, a `doc` (what it
decides and when, in words a user reads: `nsyswrap list --rules` and docs/rules.md print
it), its `thresholds` (each a `Threshold`: a name that says what it is, its default and a
one-line doc), its `kind` and `find`, its function. A `doc` names a threshold as
`{name}`; `prose()` writes it with the default (`{comm_bound}` reads `15 %`).

Kinds, by what `find` takes and gives (nsyswrap.report.diagnosis runs them in order):

* `finding`: `find(facts, limits) -> list[Finding]` (facts: nsyswrap.report.diagnosis.facts);
* `label`: a verdict, `{"label", "reason"}`, of a device, the run or a section;
* `causes`: which of the replay's candidate fixes are named (rule replay_causes);
* `ranking`: the findings in their order, `find(facts, findings, limits)` (rule
  noise_floor: those within the run's noise last);
* `advice`: the sentences a finding recommends, each only on its evidence;
* `window`: what the report analyses (the steps, the outliers set apart);
* `figures`: the key figures per device the diagnosis lists;
* `note`: a section's own note.

A finding rule says how its findings rank (`order`): by what fixing them saves
(`saving`: the replay's, largest first, before every other finding), by their share of
the step time (`share`: after those, largest first), or after both as context
(`context`). Ties keep the order of the registry (nsyswrap.report.diagnosis.rules.RULES).

`limits` holds the thresholds' values (`limits.comm_bound`): a rule's function takes them
as an argument, so a test may give other values (`RULE.limits(comm_bound=0.5)`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

KINDS = ("label", "causes", "finding", "ranking", "advice", "window", "figures", "note")
ORDERS = ("saving", "share", "context")
UNITS = ("share", "ns", "x", "count")


@dataclass(frozen=True)
class Threshold:
    """One threshold: `name` says what it is (`wait_dominates_share`), `default` its value,
    `doc` one line on what it decides, `unit` how its value reads: share (0-1, in %), ns
    (a duration), x (a ratio) or count."""

    name: str
    default: float
    doc: str
    unit: str = "share"

    def __post_init__(self):
        if self.unit not in UNITS:
            raise ValueError(f"threshold {self.name}: unit {self.unit!r} is not one of {UNITS}")

    def text(self, value: float | None = None) -> str:
        """The value as the docs say it: `15 %`, `100 us`, `3x`, `2`."""
        v = self.default if value is None else value
        if self.unit == "share":
            return f"{100 * v:.0f} %" if round(100 * v) == 100 * v or v >= 0.1 else f"{100 * v:g} %"
        if self.unit == "ns":
            for unit, size in (("s", 10**9), ("ms", 10**6), ("us", 10**3)):
                if v >= size:
                    return f"{v / size:g} {unit}"
            return f"{v:g} ns"
        if self.unit == "x":
            return f"{v:g}x"
        return f"{v:g}"


class Limits:
    """The values of a rule's thresholds, read as attributes (`limits.comm_bound`);
    frozen."""

    __slots__ = ("_values",)

    def __init__(self, values: dict[str, float]):
        object.__setattr__(self, "_values", dict(values))

    def __getattr__(self, name: str) -> float:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"no threshold {name!r}") from None

    def __setattr__(self, name: str, value) -> None:
        raise AttributeError("limits are frozen")

    def __repr__(self) -> str:
        return f"Limits({self._values!r})"


@dataclass(frozen=True)
class Rule:
    """One rule (module doc)."""

    id: str
    doc: str
    kind: str
    thresholds: tuple[Threshold, ...] = ()
    find: Callable | None = None
    order: str = ""  # a finding rule's: saving, share or context

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"rule {self.id}: kind {self.kind!r} is not one of {KINDS}")
        if (self.kind == "finding") != (self.order in ORDERS):
            raise ValueError(f"rule {self.id}: a finding rule, and only one, has an order")
        names = [t.name for t in self.thresholds]
        if len(set(names)) != len(names):
            raise ValueError(f"rule {self.id}: a threshold is named twice")

    def threshold(self, name: str) -> Threshold:
        found = next((t for t in self.thresholds if t.name == name), None)
        if found is None:
            raise KeyError(f"rule {self.id} has no threshold {name!r}")
        return found

    def default(self, name: str) -> float:
        """The default value of threshold `name`."""
        return self.threshold(name).default

    def limits(self, **given: float) -> Limits:
        """The thresholds' values: their defaults, or those `given` by name."""
        unknown = set(given) - {t.name for t in self.thresholds}
        if unknown:
            raise KeyError(f"rule {self.id} has no threshold {sorted(unknown)}")
        return Limits({t.name: given.get(t.name, t.default) for t in self.thresholds})

    def prose(self) -> str:
        """The doc, each `{name}` written as its threshold's default (`15 %`)."""
        return self.doc.format(**{t.name: t.text() for t in self.thresholds})
