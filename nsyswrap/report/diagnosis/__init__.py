"""The diagnosis on top of a report: the few findings that cost the most step time, ranked
by that cost, each with its number and its evidence; every GPU's label; what the
single-rank and cross-rank sections' verdicts are.

It reads only the report dict's finished sections (their stable table ids and columns,
never SQL), through `Facts` built once, and never writes into them: `decide(report)` gives
a `Diagnosis`, whose decisions the report's document places where its layout has them
(nsyswrap.report.document). Each decision is a rule of its own, one a file
(nsyswrap.report.diagnosis.rules, docs/rules.md):

* every GPU's label (rule device_label), then the causes the what-if replay names (rule
  replay_causes);
* the findings, by the rules' `order`: cross-rank findings first, by what fixing them
  saves (the straggler by its lag where there is no replay); then device findings, by
  their share of the time (one per verdict, and the compute, memory and host tables'
  findings where they change the answer); then context (MFU, GPU memory); a cross-rank
  finding whose saving is within the run's step-to-step noise after all of them, never
  headlined (rule noise_floor);
* the sections' verdicts (rules run_label, crossrank_label) and the key figures per GPU
  (rule step_figures);
* recommendations follow the findings and cite their figures; framework advice only for
  frameworks the trace section saw.

Costs are per step when the report found steps, else over the analysed span (the run,
for the straggler), as each finding's `cost_basis` says; a finding about several GPUs
gives the figures of one GPU (their mean, "per GPU"; "per rank" where ranks share a
physical GPU: two ranks on one GPU are not two GPUs), and its advice the same figures.
"""

from __future__ import annotations

from dataclasses import dataclass

from nsyswrap.report.diagnosis.facts import Facts
from nsyswrap.report.diagnosis.finding import Finding
from nsyswrap.report.diagnosis.rules import (
    crossrank_label,
    device_bound,
    device_label,
    finding_rules,
    noise_floor,
    replay_causes,
    run_label,
    step_figures,
    step_window,
)
from nsyswrap.report.diagnosis.words import devices
from nsyswrap.report.figures import section

__all__ = ["Diagnosis", "Facts", "Finding", "decide", "diagnose"]
NO_CUDA = (
    "no report has GPU activity in the window (no CUDA kernel, memcpy or memset); capture "
    "with nsys profile --trace=cuda"
)
NO_GPU_WORK = (
    "no report has GPU activity in the window (no CUDA kernel, memcpy or memset), and every "
    "capture traced CUDA (the trace section's capture table): the program ran no GPU work "
    "while captured (on the CPU, or on a GPU nsys could not see)"
)


@dataclass(frozen=True)
class Diagnosis:
    """What the diagnosis decided: its findings in order, the run's label (the single-rank
    section's verdict) and the cross-rank section's (None: its own stands)."""

    facts: Facts
    findings: tuple[Finding, ...]
    run_label: dict
    crossrank_label: dict | None

    @property
    def device_advice(self) -> list[str]:
        """The device findings' advice, as the single-rank section recommends it."""
        said = [f for f in self.findings if f.scope == "device" and f.id in device_bound.CAUSES]
        return [
            f.advice
            if len(said) == 1
            else f"On {devices(list(f.devices), self.facts.per_rank)} ({f.label}): {f.advice}"
            for f in said
            if f.advice
        ]

    def headline(self) -> str:
        labels = self.facts.labels
        f = next((f for f in self.findings if not f.extra.get("below_noise")), None)
        if f is not None:
            if f.scope == "cross-rank" or len(labels) == 1:
                return f.label.upper()
            unit = self.facts.unit(list(labels))
            return f"{f.label.upper()} ({len(f.devices)} of {len(labels)} {unit}s)"
        if not labels:
            return "NOTHING IN THE WINDOW" if self.facts.activities else "NO GPU ACTIVITY"
        found = {v["label"] or "no verdict" for v in labels.values()}
        return (found.pop() if len(found) == 1 else "mixed").upper()

    def cannot_answer(self) -> list[dict]:
        facts = self.facts
        out = [
            c
            for c in section(facts.report, "crossrank").get("cannot_answer") or []
            if c["what"].startswith("what a fix would save")
        ]
        if not facts.totals:
            captures = facts.rows("trace", "capture")
            cuda = bool(captures) and all(
                "cuda" in (r.get("traced") or "").split(",") for r in captures
            )
            reason = (
                (NO_GPU_WORK if cuda else NO_CUDA)
                if not facts.rows("trace", "activity")
                else "no GPU activity falls in the window"
            )
            out.append({"what": "where the GPU time goes", "reason": reason})
        return out

    def as_json(self) -> dict:
        """The report's `diagnosis` (layout in README, "The report as JSON")."""
        facts, figures = self.facts, step_figures.RULE.limits()
        findings = [f.as_json() for f in self.findings]
        return {
            "headline": self.headline(),
            "findings": findings,
            "noise_floor": noise_floor.floor_figure(facts),
            "window": step_window.describe(facts, step_window.RULE.limits()),
            "devices": [step_figures.device_row(facts, k, figures) for k in sorted(facts.totals)],
            "host_steps": step_figures.host_steps(facts, figures),
            "worst_steps": step_figures.worst_steps(facts, figures),
            "recommendations": [f["recommendation"] for f in findings if f["recommendation"]],
            "cannot_answer": self.cannot_answer(),
        }


def _found(facts: Facts, order: str) -> list[Finding]:
    rules = [rule for rule in finding_rules() if rule.order == order]
    return [f for rule in rules for f in rule.find(facts, rule.limits())]


def decide(report: dict) -> Diagnosis:
    """The diagnosis of a report dict with its sections (module doc)."""
    facts = Facts.of(report)
    facts = facts.decided(labels=device_label.find(facts, device_label.RULE.limits()))
    facts = facts.decided(causes=tuple(replay_causes.find(facts, replay_causes.RULE.limits())))
    cross = _found(facts, "saving")
    sized = [f for f in cross if f.saving["value"] is not None]
    saving = sorted(sized, key=lambda f: -f.saving["value"])
    unsized = [f for f in cross if f.saving["value"] is None]
    by_share = sorted(_found(facts, "share"), key=lambda f: -f.share["value"])
    found = [*saving, *unsized, *by_share, *_found(facts, "context")]
    findings = tuple(noise_floor.find(facts, found, noise_floor.RULE.limits()))
    return Diagnosis(
        facts=facts,
        findings=findings,
        run_label=run_label.find(facts, run_label.RULE.limits()),
        crossrank_label=crossrank_label.find(facts, list(findings), crossrank_label.RULE.limits()),
    )


def diagnose(report: dict) -> dict:
    """The report's `diagnosis` (JSON) of a report dict with its sections."""
    return decide(report).as_json()
