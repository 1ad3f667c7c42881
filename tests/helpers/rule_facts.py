"""Small hand-built report dicts and their facts, for unit tests of the diagnosis' rules
(nsyswrap.report.diagnosis.rules): no run, no SQL, milliseconds each."""

from __future__ import annotations

from nsyswrap.report.diagnosis import Facts
from nsyswrap.report.diagnosis.rules import device_label, replay_causes


def ns(v) -> dict:
    return {"value": v, "unit": "ns"}


def frac(v) -> dict:
    return {"value": v, "unit": "fraction"}


def count(v) -> dict:
    return {"value": v, "unit": "count"}


def report(tables: dict[str, list[dict]], verdicts: dict | None = None, **keys) -> dict:
    """A report dict of `tables` ("section.table": rows), its sections' `verdicts`
    (section: verdict) and other top-level `keys` (window, options)."""
    sections: dict[str, dict] = {}
    for name, rows in tables.items():
        sid, tid = name.split(".")
        sections.setdefault(sid, {"id": sid, "tables": []})["tables"].append(
            {"id": tid, "rows": rows}
        )
    for sid, v in (verdicts or {}).items():
        sections.setdefault(sid, {"id": sid, "tables": []})["verdict"] = v
    return {**keys, "sections": list(sections.values())}


def facts(tables: dict[str, list[dict]], verdicts: dict | None = None, **keys) -> Facts:
    """The facts of `report(...)`, with the labels and causes decided (as the diagnosis
    decides them before its findings)."""
    f = Facts.of(report(tables, verdicts, **keys))
    f = f.decided(labels=device_label.find(f, device_label.RULE.limits()))
    return f.decided(causes=tuple(replay_causes.find(f, replay_causes.RULE.limits())))


def ledger(rank: int, device: int = 0, span=10**7, **parts) -> dict:
    """A single_rank.ledger row: `parts` are compute_busy, comm_busy, both, comm_only,
    copy_only, idle (ns)."""
    names = ("compute_busy", "comm_busy", "both", "comm_only", "copy_only", "idle")
    return {"rank": rank, "device": device, "span": ns(span)} | {
        k: ns(parts.get(k, 0)) for k in names
    }


def activity(rank: int, device: int = 0, n: int = 1000) -> dict:
    return {"rank": rank, "device": device, "activities": count(n)}


def fix(kind, gain, rank=None, phase=None, steps=(0, 1), pattern="persistent", **more) -> dict:
    """A crossrank.whatif row (step time 100 ms: gain_pct = gain / 1 ms)."""
    return {
        "kind": kind,
        "rank": rank,
        "phase": phase,
        "stage": more.get("stage"),
        "pg": more.get("pg"),
        "op": more.get("op"),
        "gain_ns_per_step": ns(gain),
        "gain_pct": {"value": gain / 1e6, "unit": "%"},
        "pattern": pattern,
        "steps": ",".join(map(str, steps)),
        "affected_steps": count(len(steps)),
        "steps_in_window": count(10),
        "gain_ns_per_affected_step": ns(more.get("per_affected", gain * 10 / max(len(steps), 1))),
    }
