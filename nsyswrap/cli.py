"""The `nsyswrap` command: a thin shell, one library call per command."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from nsyswrap import api
from nsyswrap.errors import NsysWrapError
from nsyswrap.html_report import report_with_html
from nsyswrap.output import Format, check_writable, write
from nsyswrap.report import ReportFormat, ReportOptions, report as build_report, write_report
from nsyswrap.run import Opener
from nsyswrap.timeline import DEFAULT_MAX_EVENTS, write_timeline

app = typer.Typer(
    help="Where does the step time of multi-GPU training go? Query Nsight Systems exports.",
    context_settings={"help_option_names": ["-h", "--help"]},
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    add_completion=False,
)
console = Console()

Reports = Annotated[list[Path], typer.Argument(help="Report .sqlite files, run directories or globs (one report per rank).")]
Fmt = Annotated[Format, typer.Option("--format", "-f", help="table for people; csv, json or parquet for machines.")]
Output = Annotated[Optional[Path], typer.Option("--output", "-o", help="Write to this file instead of the terminal.")]
Force = Annotated[bool, typer.Option("--force", help="Overwrite an existing output file.")]
Params = Annotated[list[str], typer.Option("--param", "-p", help="Query parameter NAME=VALUE (repeatable).")]
RankPattern = Annotated[str, typer.Option("--rank-pattern", help="Regex with one group that finds the rank in a file name.")]
Jobs = Annotated[int, typer.Option("--jobs", "-j", min=1, help="Reports read and analysed at a time, each in a worker process (bounds memory).")]


def _opener(rank_pattern: str, jobs: int) -> Opener:
    """Reading options plus a progress bar on stderr (a terminal only) while reports are
    normalized."""
    return Opener(rank_pattern=rank_pattern, jobs=jobs,
                  progress=_progress_bar() if sys.stderr.isatty() else None)


def _progress_bar():
    """A progress callback that draws one bar per series of per-report work (reading the
    reports, then computing their metrics)."""
    from rich.progress import Progress

    state: dict[str, object] = {}

    def advance(done: int, total: int) -> None:
        if "bar" not in state:
            bar = Progress(console=Console(stderr=True), transient=True)
            bar.start()
            state["bar"], state["task"] = bar, bar.add_task("reports", total=total)
        state["bar"].update(state["task"], completed=done)
        if done == total:
            state.pop("bar").stop()

    return advance


def _params(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise NsysWrapError(f"-p {pair}", "is not NAME=VALUE", "write e.g. -p min_dur_ns=1000")
        out[name] = value
    return out


@app.command("list")
def list_queries(fmt: Fmt = Format.table) -> None:
    """List the prebuilt queries, one line each."""
    write(api.catalog_table(), fmt, None, False, console)


@app.command()
def query(
    name: Annotated[str, typer.Argument(help="Prebuilt query, e.g. kernels.summary (see `nsyswrap list`).")],
    reports: Reports,
    param: Params = [],
    fmt: Fmt = Format.table,
    output: Output = None,
    force: Force = False,
    rank_pattern: RankPattern = r"rank(\d+)",
    jobs: Jobs = 2,
) -> None:
    """Run prebuilt query NAME over REPORTS."""
    check_writable(output, force)
    result = api.query(name, reports, opener=_opener(rank_pattern, jobs), **_params(param))
    write(result, fmt, output, force, console)


@app.command()
def sql(
    text: Annotated[str, typer.Argument(help="SQL over the views (see `nsyswrap views`); $name for parameters.")],
    reports: Reports,
    param: Params = [],
    fmt: Fmt = Format.table,
    output: Output = None,
    force: Force = False,
    rank_pattern: RankPattern = r"rank(\d+)",
    jobs: Jobs = 2,
) -> None:
    """Run ad-hoc SQL over the normalized views of REPORTS."""
    check_writable(output, force)
    result = api.sql(text, reports, opener=_opener(rank_pattern, jobs), **_params(param))
    write(result, fmt, output, force, console)


@app.command()
def views(fmt: Fmt = Format.table) -> None:
    """List the normalized views and their columns."""
    write(api.views_table(), fmt, None, False, console)


@app.command()
def report(
    reports: Reports,
    fmt: Annotated[ReportFormat, typer.Option("--format", "-f", help="table for people; json: every figure with its unit, null with a reason.")] = ReportFormat.table,
    output: Output = None,
    force: Force = False,
    steps: Annotated[Optional[str], typer.Option("--steps", help="Analyse only steps FROM:TO (TO excluded), e.g. 2:5.")] = None,
    window_nvtx: Annotated[Optional[str], typer.Option("--window-nvtx", help="Analyse only the span of NVTX ranges LIKE this, e.g. 'forward%'.")] = None,
    step_pattern: Annotated[str, typer.Option("--step-pattern", help="LIKE pattern of the step ranges, e.g. 'ProfilerStep#%'.")] = "step:%",
    rank_pattern: RankPattern = r"rank(\d+)",
    jobs: Jobs = 2,
    html: Annotated[Optional[Path], typer.Option("--html", help="Also write a self-contained HTML page with plots (timeline, ledger, skew heat map).")] = None,
    detail: Annotated[bool, typer.Option("--detail", help="Show every row of every table (long tables are summarized otherwise).")] = False,
    section: Annotated[Optional[str], typer.Option("--section", help="Show only this section or table, every row (e.g. steps, stragglers, diagnosis).")] = None,
) -> None:
    """Summarize REPORTS: time ledger, collective exposure, idle gaps, steps, stragglers and a verdict."""
    check_writable(output, force)
    options = ReportOptions.parse(steps, window_nvtx, step_pattern)
    if html is None:
        result = build_report(reports, options, opener=_opener(rank_pattern, jobs))
    else:
        result = report_with_html(reports, options, html, opener=_opener(rank_pattern, jobs), force=force)
    write_report(result, fmt, output, force, console, detail=detail, section=section)


@app.command()
def timeline(
    reports: Reports,
    output: Annotated[Path, typer.Option("--output", "-o", help="Trace file to write (Chrome/Perfetto JSON).")],
    start_step: Annotated[Optional[int], typer.Option("--start-step", help="First step of the window (default: the first).")] = None,
    end_step: Annotated[Optional[int], typer.Option("--end-step", help="Last step of the window, included (default: the last).")] = None,
    max_events: Annotated[int, typer.Option("--max-events", min=1, help="Keep at most this many events, longest first.")] = DEFAULT_MAX_EVENTS,
    force: Force = False,
    rank_pattern: RankPattern = r"rank(\d+)",
    jobs: Jobs = 2,
) -> None:
    """Write an aligned multi-rank trace of REPORTS for ui.perfetto.dev or chrome://tracing."""
    events = write_timeline(reports, output, start_step=start_step, end_step=end_step, max_events=max_events,
                            opener=_opener(rank_pattern, jobs), force=force)
    console.print(f"{output}: {events:,} events")


def _presets_help() -> str:
    from nsyswrap.synth.presets import PRESETS

    return "\n\n".join(f"{name}: {about}" for name, (about, _) in PRESETS.items())


@app.command(epilog=_presets_help())
def generate(
    scenario: Annotated[str, typer.Argument(help="A preset (listed below) or a scenario / truth .json file.")],
    out: Annotated[Path, typer.Argument(help="Directory for rank<N>.sqlite reports and truth.json.")],
    ranks: Annotated[Optional[int], typer.Option("--ranks", min=1, help="Number of ranks.")] = None,
    steps: Annotated[Optional[int], typer.Option("--steps", min=1, help="Training steps per rank.")] = None,
    kernels_per_step: Annotated[Optional[int], typer.Option("--kernels-per-step", min=1, help="Compute kernels per step and device.")] = None,
    seed: Annotated[Optional[int], typer.Option("--seed", help="Random seed.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace reports already in OUT.")] = False,
) -> None:
    """Write synthetic per-rank reports with planted ground truth (truth.json) for demos and tests."""
    from nsyswrap.synth.run import generate_named

    truth = generate_named(scenario, out, force=force, ranks=ranks, steps=steps,
                           kernels_per_step=kernels_per_step, seed=seed)
    console.print(f"{out}: {len(truth.ranks)} reports, {sum(r['kernels'] for r in truth.ranks):,} kernels, truth.json")


# --- launch and export (nsyswrap/launch/) ---------------------------------------------------------
LAUNCH_HELP = """Run a training command with every selected rank under `nsys profile`, then export the reports.

Put the command after --, e.g.
nsyswrap launch --annotate modules,collectives,steps --out runs/a -- torchrun --nproc-per-node 8 train.py

Works the same with srun and mpirun/mpiexec. Exits with the training's exit code.
"""


@app.command(help=LAUNCH_HELP, context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def launch(
    ctx: typer.Context,
    out: Annotated[Optional[Path], typer.Option("--out", help="Run directory for reports and manifest (default: runs/<time>).")] = None,
    ranks: Annotated[Optional[str], typer.Option("--ranks", help="Ranks to profile, e.g. 0,1,7 or 0-3 (default: all).")] = None,
    steps: Annotated[Optional[str], typer.Option("--steps", help="Capture only steps START:STOP (steps from nsyswrap.step, else one per optimizer step).")] = None,
    every: Annotated[Optional[int], typer.Option("--every", help="Capture the --steps window again every N steps.")] = None,
    annotate: Annotated[str, typer.Option("--annotate", help="Annotate at start-up: modules, collectives, steps (comma list) or all.")] = "",
    trace: Annotated[str, typer.Option("--trace", help="nsys --trace value.")] = "cuda,nvtx,osrt",
    nsys_arg: Annotated[list[str], typer.Option("--nsys-arg", help="Extra nsys profile option, --name=value form (repeatable).")] = [],
    nsys: Annotated[str, typer.Option("--nsys", help="The nsys executable.")] = "nsys",
    force: Annotated[bool, typer.Option("--force", help="Replace a run already in --out.")] = False,
    export: Annotated[bool, typer.Option("--export/--no-export", help="Export the reports to SQLite afterwards.")] = True,
    jobs: Annotated[Optional[int], typer.Option("--jobs", "-j", min=1, help="Reports exported at a time (default: one per core).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print each rank's command and stop.")] = False,
) -> None:
    from datetime import datetime

    from nsyswrap.launch.config import LaunchConfig
    from nsyswrap.launch.run import launch as run_launch

    cfg = LaunchConfig.build(ctx.args, out=out or Path("runs") / datetime.now().strftime("%Y%m%d-%H%M%S"),
                             ranks=ranks, steps=steps, every=every, trace=trace, nsys_args=nsys_arg,
                             annotate=annotate, nsys=nsys, force=force, export=export, jobs=jobs, dry_run=dry_run)
    raise typer.Exit(run_launch(cfg))


@app.command()
def export(
    run: Annotated[Path, typer.Argument(help="Run directory (the --out of `nsyswrap launch`).")],
    force: Annotated[bool, typer.Option("--force", help="Export again reports that already have a .sqlite.")] = False,
    jobs: Annotated[Optional[int], typer.Option("--jobs", "-j", min=1, help="Reports exported at a time (default: one per core).")] = None,
    nsys: Annotated[str, typer.Option("--nsys", help="The nsys executable.")] = "nsys",
) -> None:
    """Export every report of RUN to SQLite beside it (resumable: done ones are skipped)."""
    from nsyswrap.launch.export import export_run

    for path in export_run(run, force=force, jobs=jobs, nsys=nsys):
        print(path)


def main(argv: list[str] | None = None) -> None:
    """Entry point: bad input becomes one `Error: ...` line and exit code 1."""
    try:
        app(args=argv, prog_name="nsyswrap")
    except NsysWrapError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
