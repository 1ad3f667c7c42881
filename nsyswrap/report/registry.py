"""The report's sections, declared once: each with its builder and the modules it reads
for the options given. The plan (`nsyswrap plan`: nsyswrap.report.planned) and the build
(nsyswrap.report.flow) read this one list, so what is planned is what is built.

A section's `modules(options)` are `key: (module, params)`: planned (each report's share
computed in the pass that normalizes it) and, unless `one_by_one`, computed together in
one pass when the section first reads one. `asked(options)` are the modules it reads on
some paths only (a capture without GPU work, the cross-rank section of two ranks or
more): computed when it reads them, not planned. A builder takes the section's `Inputs`
(nsyswrap.report.flow) and never calls the engine itself.

The page's plots (nsyswrap.report.plots) are declared here too (`PLOTS`): they read
modules the sections read, with the report's window.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from nsyswrap.report.options import ReportOptions

Modules = dict[str, tuple[str, dict]]


def _none(options: ReportOptions) -> Modules:
    return {}


@dataclass(frozen=True)
class Section:
    """One section of the report (module doc)."""

    id: str
    build: Callable  # (Inputs) -> the section dict (layout: nsyswrap.report)
    modules: Callable[[ReportOptions], Modules]
    asked: Callable[[ReportOptions], Modules] = _none
    one_by_one: bool = False  # its modules computed each when first read (only some are)


def sections() -> tuple[Section, ...]:
    """Every section, in the report's order (imported when a report is built or planned:
    they load pandas)."""
    from nsyswrap.report import compute, cross_rank, data_quality, host, memory, single_rank
    from nsyswrap.report import trace_facts as trace

    return (
        Section(
            "single_rank",
            single_rank.single_rank_section,
            single_rank.single_rank_modules,
            single_rank.asked_modules,
        ),
        Section("compute", compute.compute_section, compute.compute_modules),
        Section(
            "crossrank",
            cross_rank.crossrank_section,
            cross_rank.crossrank_modules,
            cross_rank.asked_modules,
            one_by_one=True,  # with two ranks or more; the replay's only when it is trusted
        ),
        Section("memory", memory.memory_section, memory.memory_modules),
        Section("host", host.host_section, host.host_modules),
        Section("trace", trace.trace_section, trace.trace_modules),
        Section(
            "data_quality", data_quality.data_quality_section, data_quality.data_quality_modules
        ),
    )


def plots() -> Section:
    """What the HTML page's plots read (nsyswrap.report.plots): not a section of the
    report's document, built with it where the page is asked for."""
    from nsyswrap.report import plots

    return Section("plots", plots.plot_data, plots.plots_modules, one_by_one=True)
