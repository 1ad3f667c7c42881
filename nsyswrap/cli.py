"""The `nsyswrap` command: a thin shell, one library call per command.

Imports stay light until a command runs (pandas, DuckDB and the engine load inside the
commands), so `nsyswrap --help` answers at once. Commands are listed in workflow order.
"""

from __future__ import annotations

import functools
import inspect
import sys
from dataclasses import replace
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
import typer.core

from nsyswrap.errors import EntryGone, NsysWrapError, limit_error, note, printable
from nsyswrap.output import Format, ReportFormat, fall_back_where_unencodable, write
from nsyswrap.storage.safe_output import check_writable, save

# Workflow order in `nsyswrap --help`; commands not named here follow in definition order.
ORDER = (
    "launch",
    "export",
    "report",
    "diff",
    "timeline",
    "check-claims",
    "mcp",
    "query",
    "sql",
    "list",
    "views",
    "plan",
    "cache",
    "generate",
)


class _WorkflowOrder(typer.core.TyperGroup):
    def list_commands(self, ctx) -> list[str]:
        names = list(self.commands)
        return sorted(names, key=lambda n: ORDER.index(n) if n in ORDER else len(ORDER))


class _Command(typer.core.TyperCommand):
    """Every command's class. Its help names an argument by its metavar alone (typer's own
    help record adds the Python type, `REPORTS <list[Path]>`), through the command's
    `format_options` and each parameter's `get_help_record`, `param_type_name` and
    `metavar` (click's API, which typer keeps): no patch of typer's classes."""

    def format_options(self, ctx, formatter) -> None:
        arguments, options = [], []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                arguments.append((param.metavar or param.name.upper(), record[1]))
            else:
                options.append(record)
        for title, rows in (("Arguments", arguments), ("Options", options)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


class _Typer(typer.Typer):
    """A Typer whose commands are `_Command`s unless they name their own class."""

    def command(self, *args, cls=None, **kwargs):
        return super().command(*args, cls=cls or _Command, **kwargs)


app = _Typer(
    cls=_WorkflowOrder,
    help="Where does the step time of multi-GPU training go? Query Nsight Systems exports.",
    context_settings={"help_option_names": ["-h", "--help"]},
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    add_completion=False,
    rich_markup_mode=None,
)


class _Console:
    """Where results go: stdout, with its width: $COLUMNS if set, else the terminal's, else
    80 (a pipe or a file)."""

    @property
    def file(self):
        return sys.stdout

    @property
    def width(self) -> int:
        import os
        import shutil

        columns = os.environ.get("COLUMNS", "")
        if columns.isdigit() and int(columns) >= 40:
            return int(columns)
        return shutil.get_terminal_size((80, 24)).columns if sys.stdout.isatty() else 80


console = _Console()


def _print_version(value: bool) -> None:
    if value:
        import nsyswrap

        print(f"nsyswrap {nsyswrap.__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Where does the step time of multi-GPU training go? Query Nsight Systems exports."""


# readable=False: nsyswrap itself names an unreadable path in one line (exit 1), not click.
Reports = Annotated[
    list[Path],
    typer.Argument(
        metavar="REPORTS",
        readable=False,
        help="Report .sqlite files, run directories or globs (one report per rank).",
    ),
]
Fmt = Annotated[
    Format,
    typer.Option("--format", "-f", help="table for people; csv, json or parquet for machines."),
]
Output = Annotated[
    Path | None,
    typer.Option(
        "--output",
        "-o",
        metavar="FILE",
        readable=False,
        help="Write to this file instead of the terminal.",
    ),
]
Force = Annotated[bool, typer.Option("--force", help="Overwrite an existing output file.")]
Params = Annotated[
    list[str] | None,
    typer.Option(
        "--param", "-p", metavar="NAME=VALUE", help="Query parameter NAME=VALUE (repeatable)."
    ),
]
RankPattern = Annotated[
    str,
    typer.Option(
        "--rank-pattern",
        metavar="REGEX",
        help="Regex with one group that finds the rank in a file name.",
    ),
]
Steps = Annotated[
    str | None,
    typer.Option(
        "--steps",
        metavar="A:B",
        help="Analyse only steps A to B-1, e.g. 2:5 (either side may be left out).",
    ),
]
StepPattern = Annotated[
    str,
    typer.Option(
        "--step-pattern",
        metavar="PATTERN",
        help="LIKE pattern of the step ranges, e.g. 'ProfilerStep#%'.",
    ),
]
WindowNvtx = Annotated[
    str | None,
    typer.Option(
        "--window-nvtx",
        metavar="PATTERN",
        help="Analyse only the span of NVTX ranges LIKE this, e.g. 'forward%'.",
    ),
]
FlopsPerStep = Annotated[
    float | None,
    typer.Option(
        "--flops-per-step",
        metavar="N",
        help="Model FLOPs one GPU computes per step: MFU and achieved TFLOP/s per step and rank.",
    ),
]
ModelParams = Annotated[
    float | None,
    typer.Option(
        "--model-params",
        metavar="P",
        help="Model parameters: FLOPs per step = 6 x P x T (with --tokens-per-step).",
    ),
]
TokensPerStep = Annotated[
    float | None,
    typer.Option(
        "--tokens-per-step",
        metavar="T",
        help="Tokens one GPU processes per step (with --model-params).",
    ),
]
PeakTflops = Annotated[
    float | None,
    typer.Option(
        "--peak-tflops",
        metavar="X",
        help="Peak TFLOP/s of one GPU for MFU "
        "[default: the peak table's, by GPU name and --dtype].",
    ),
]
Dtype = Annotated[
    str,
    typer.Option(
        "--dtype", metavar="TYPE", help="Data type of the peak: bf16, fp16, fp8, tf32 or fp32."
    ),
]
Jobs = Annotated[
    int,
    typer.Option(
        "--jobs",
        "-j",
        min=1,
        metavar="N",
        help="Reports read and analysed at a time, each in a worker process (bounds memory).",
    ),
]
WholeCapture = Annotated[
    bool,
    typer.Option(
        "--whole-capture",
        help="Analyse each GPU's first to last activity, not only the steps "
        "(the default window when the capture has steps).",
    ),
]
AllowUnrelated = Annotated[
    bool,
    typer.Option(
        "--allow-unrelated",
        help=(
            "Analyse reports across ranks even when their captures are far apart in time "
            "(different runs)."
        ),
    ),
]


class EngineName(str, Enum):
    local = "local"
    dask = "dask"


EngineOpt = Annotated[
    EngineName,
    typer.Option(
        "--engine",
        help="Where per-report work runs: local worker processes, or the workers of a running "
        "Dask cluster (shared file system).",
    ),
]
SchedulerFile = Annotated[
    Path | None,
    typer.Option(
        "--scheduler-file",
        metavar="FILE",
        readable=False,
        help="--engine dask: the file `dask scheduler --scheduler-file` wrote.",
    ),
]
SchedulerAddress = Annotated[
    str | None,
    typer.Option(
        "--scheduler-address",
        metavar="ADDRESS",
        help="--engine dask: tcp://HOST:PORT (default $DASK_SCHEDULER_ADDRESS).",
    ),
]


CACHE_MAX_HELP = (
    "Cap of the cache, e.g. 20G, 500M or 10% (of the free disk); least recently "
    "used entries go first [default: $NSYSWRAP_CACHE_MAX, else 25%]."
)
CacheMax = Annotated[str | None, typer.Option("--cache-max", metavar="SIZE", help=CACHE_MAX_HELP)]
# Options of the commands that run nsys (launch, export), defined once.
ExportJobs = Annotated[
    int | None,
    typer.Option(
        "--jobs",
        "-j",
        min=1,
        metavar="N",
        help="Reports exported at a time (default: one per core).",
    ),
]
NsysPath = Annotated[str, typer.Option("--nsys", metavar="PATH", help="The nsys executable.")]

ENGINE_OPTIONS = {  # name: (annotation, default): every command that opens reports takes them
    "rank_pattern": (RankPattern, r"rank(\d+)"),
    "jobs": (Jobs, 2),
    "engine": (EngineOpt, EngineName.local),
    "scheduler_file": (SchedulerFile, None),
    "scheduler_address": (SchedulerAddress, None),
    "cache_max": (CacheMax, None),
}


def opens_reports(command):
    """Give `command` the engine options (ENGINE_OPTIONS, defined here once) and, in its
    `opener` parameter, the Opener they make: reading options, the engine, the cache's cap,
    and a progress bar on stderr (a terminal only) while reports are read."""
    signature = inspect.signature(command, eval_str=True)
    own = [p for p in signature.parameters.values() if p.name != "opener"]
    added = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=kind)
        for name, (kind, default) in ENGINE_OPTIONS.items()
    ]

    @functools.wraps(command)
    def with_opener(*args, **kwargs):
        from nsyswrap.engine.opener import Opener
        from nsyswrap.engine.pool import find_engine

        given = {name: kwargs.pop(name) for name in ENGINE_OPTIONS}
        opener = Opener(
            rank_pattern=given["rank_pattern"],
            jobs=given["jobs"],
            progress=_progress_bar() if sys.stderr.isatty() else None,
            engine=find_engine(
                given["engine"].value, given["scheduler_file"], given["scheduler_address"]
            ),
            cache_max=given["cache_max"] or "",
        )
        return command(*args, opener=opener, **kwargs)

    with_opener.__signature__ = signature.replace(parameters=own + added)
    with_opener.__annotations__ = {p.name: p.annotation for p in own + added}
    return with_opener


REPORT_OPTIONS = {  # name: (annotation, default): report and plan take them, defined once
    "steps": (Steps, None),
    "window_nvtx": (WindowNvtx, None),
    "step_pattern": (StepPattern, "step:%"),
    "whole_capture": (WholeCapture, False),
    "flops_per_step": (FlopsPerStep, None),
    "model_params": (ModelParams, None),
    "tokens_per_step": (TokensPerStep, None),
    "peak_tflops": (PeakTflops, None),
    "dtype": (Dtype, "bf16"),
}


def takes_report_options(command):
    """Give `command` the report's options (REPORT_OPTIONS: the window and the MFU inputs)
    and, in its `options` parameter, the ReportOptions they make."""
    signature = inspect.signature(command, eval_str=True)
    own = [p for p in signature.parameters.values() if p.name != "options"]
    added = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=kind)
        for name, (kind, default) in REPORT_OPTIONS.items()
    ]

    @functools.wraps(command)
    def with_options(*args, **kwargs):
        from nsyswrap.report import ReportOptions

        given = {name: kwargs.pop(name) for name in REPORT_OPTIONS}
        window = [given.pop(name) for name in ("steps", "window_nvtx", "step_pattern")]
        options = ReportOptions.parse(*window, given.pop("whole_capture"), **given)
        return command(*args, options=options, **kwargs)

    with_options.__signature__ = signature.replace(parameters=own + added)
    with_options.__annotations__ = {p.name: p.annotation for p in own + added}
    return with_options


def _progress_bar():
    """A progress callback that draws one bar per series of per-report work (reading the
    reports, then computing their metrics); rich loads with the first bar (a stored
    answer draws none)."""
    state: dict[str, object] = {}

    def advance(done: int, total: int) -> None:
        if "bar" not in state:
            from rich.console import Console
            from rich.progress import Progress

            bar = Progress(console=Console(stderr=True), transient=True)
            bar.start()
            state["bar"], state["task"] = bar, bar.add_task("reports", total=total)
        state["bar"].update(state["task"], completed=done)
        if done == total:
            state.pop("bar").stop()

    return advance


def _params(pairs: list[str] | None) -> dict[str, str]:
    out = {}
    for pair in pairs or []:
        name, sep, value = pair.partition("=")
        if not sep:
            raise NsysWrapError(f"-p {pair}", "is not NAME=VALUE", "write e.g. -p min_dur_ns=1000")
        out[name] = value
    return out


@app.command("list")
def list_queries(
    fmt: Fmt = Format.table,
    rules: Annotated[
        bool,
        typer.Option(
            "--rules", help="List the diagnosis' rules and their thresholds (docs/rules.md)."
        ),
    ] = False,
) -> None:
    """List the prebuilt queries and what they return (--rules: the diagnosis' rules)."""
    from nsyswrap import api

    if rules:
        return _list_rules(fmt)
    table = api.catalog_table()
    if fmt is not Format.table:
        return write(table, fmt, None, False, console)
    from nsyswrap.text_table import wrap

    for r in table.itertuples(index=False):
        lines = wrap(r.row, console.width, indent="    ")
        if r.params:
            lines += wrap(f"parameters: {r.params}", console.width, indent="      ", first="    ")
        print("\n".join([r.name, *lines]))


def _list_rules(fmt: Format) -> None:
    """Each rule: its id and kind, what it decides, its thresholds with their defaults."""
    from nsyswrap import api
    from nsyswrap.report.diagnosis.rules import RULES
    from nsyswrap.text_table import wrap

    if fmt is not Format.table:
        return write(api.rules_table(), fmt, None, False, console)
    for r in RULES:
        lines = wrap(" ".join(r.prose().split()), console.width, indent="    ")
        for t in r.thresholds:
            said = f"{t.name} = {t.text()}: {t.doc}"
            lines += wrap(said, console.width, indent="        ", first="      ")
        print("\n".join([f"{r.id} ({r.kind})", *lines]))


@app.command()
@opens_reports
def query(
    name: Annotated[
        str,
        typer.Argument(
            metavar="NAME", help="Prebuilt query, e.g. kernels.summary (see `nsyswrap list`)."
        ),
    ],
    reports: Reports,
    param: Params = None,
    fmt: Fmt = Format.table,
    output: Output = None,
    force: Force = False,
    opener=None,
) -> None:
    """Run prebuilt query NAME over REPORTS."""
    from nsyswrap import api

    check_writable(output, force, reports)
    if output is not None and fmt in (Format.csv, Format.parquet):  # streamed: millions of rows fit
        api.query_to_file(name, reports, output, fmt.value, opener=opener, **_params(param))
        return
    result = api.query(name, reports, opener=opener, **_params(param))
    write(result, fmt, output, force, console)


@app.command()
@opens_reports
def sql(
    text: Annotated[
        str,
        typer.Argument(
            metavar="SQL", help="SQL over the views (see `nsyswrap views`); $name for parameters."
        ),
    ],
    reports: Reports,
    param: Params = None,
    fmt: Fmt = Format.table,
    output: Output = None,
    force: Force = False,
    opener=None,
) -> None:
    """Run ad-hoc SQL over the normalized views of REPORTS."""
    from nsyswrap import api

    check_writable(output, force, reports)
    result = api.sql(text, reports, opener=opener, **_params(param))
    write(result, fmt, output, force, console)


@app.command()
def views(fmt: Fmt = Format.table) -> None:
    """List the normalized views and their columns."""
    from nsyswrap import api

    table = api.views_table()
    if fmt is not Format.table:
        return write(table, fmt, None, False, console)
    from nsyswrap.text_table import wrap

    for view, cols in table.groupby("view", sort=False):
        print(view)
        for r in cols.itertuples(index=False):
            print(
                "\n".join(
                    wrap(
                        f"{r.column} {r.type}: {r.doc}",
                        console.width,
                        indent="      ",
                        first="    ",
                    )
                )
            )


@app.command()
@opens_reports
@takes_report_options
def report(
    reports: Reports,
    fmt: Annotated[
        ReportFormat | None,
        typer.Option(
            "--format",
            "-f",
            help="table for people (the default; with --html only when asked for); json: "
            "every figure with its unit, null with a reason.",
            show_default=False,
        ),
    ] = None,
    output: Output = None,
    force: Force = False,
    html: Annotated[
        Path | None,
        typer.Option(
            "--html",
            metavar="FILE",
            readable=False,
            help="Write a self-contained HTML page (the diagnosis, then plots) and print "
            "its path; the report too only with --format, --output, --section or --detail.",
        ),
    ] = None,
    detail: Annotated[
        bool,
        typer.Option(
            "--detail", help="Show every row of every table (long tables are summarized otherwise)."
        ),
    ] = False,
    section: Annotated[
        str | None,
        typer.Option(
            "--section",
            metavar="NAME",
            help="Show only this section or table, every row (e.g. steps, stragglers, diagnosis; "
            "SECTION/TABLE for a table named as its section).",
        ),
    ] = None,
    allow_unrelated: AllowUnrelated = False,
    options=None,
    opener=None,
) -> None:
    """Diagnose REPORTS: where the step time goes, what to do.

    The diagnosis and key figures per rank come first, then the time ledger, collective
    exposure, idle gaps, steps, MFU and the kernels that matter, stragglers, copies, GPU
    memory and the host's CUDA and OS calls."""
    from nsyswrap.report import answer, write_report
    from nsyswrap.report.render import check_section

    check_writable(output, force, reports)
    check_writable(html, force, reports, option="--html")
    check_section(section)
    opener = replace(opener, allow_unrelated=allow_unrelated)
    found = answer(reports, options, opener=opener, plots=html is not None)
    if html is not None:
        from nsyswrap.html_report import write_page

        write_page(found, html)
    if html is None or fmt or output or section or detail:
        fmt = fmt or ReportFormat.table
        write_report(found.document, fmt, output, force, console, detail=detail, section=section)
    if html is not None:
        print(f"wrote {html}", file=sys.stderr)


@app.command()
@opens_reports
def diff(
    base: Annotated[
        str,
        typer.Argument(
            metavar="BASE",
            help="BASE run: a run directory, a quoted glob, a manifest.json or one report .sqlite.",
        ),
    ],
    new: Annotated[str, typer.Argument(metavar="NEW", help="NEW run, the same way.")],
    fmt: Fmt = Format.table,
    output: Output = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Compare runs the comparability check refuses, and overwrite output files.",
        ),
    ] = False,
    steps: Annotated[
        str | None,
        typer.Option(
            "--steps",
            metavar="A:B",
            help="Compare only steps A to B-1, e.g. 2:5 (either side may be left out).",
        ),
    ] = None,
    window_nvtx: Annotated[
        str | None,
        typer.Option(
            "--window-nvtx",
            metavar="PATTERN",
            help="Compare only steps overlapping NVTX ranges LIKE this.",
        ),
    ] = None,
    step_pattern: StepPattern = "step:%",
    html: Annotated[
        Path | None,
        typer.Option(
            "--html", metavar="FILE", readable=False, help="Also write a self-contained HTML page."
        ),
    ] = None,
    fail_on_regression: Annotated[
        float | None,
        typer.Option(
            "--fail-on-regression",
            min=0,
            metavar="PCT",
            help="Exit 3 when NEW is significantly worse than BASE by more than PCT % "
            "(1: bad input, 2: usage error).",
        ),
    ] = None,
    metric: Annotated[
        str,
        typer.Option(
            "--metric",
            metavar="ID",
            help="Figure the gate checks: an id of --format csv, e.g. step_time:rank=2.",
        ),
    ] = "step_time",
    opener=None,
) -> None:
    """Did it help? Compare run NEW against run BASE.

    Step time (with a confidence interval), ledger shares, idle time, phases, kernels,
    NVTX ranges and collectives; the headline says what explains the change."""
    from nsyswrap.comparison import diff as diff_runs
    from nsyswrap.comparison.gate import gate
    from nsyswrap.comparison.render import check_outputs, write_diff
    from nsyswrap.report import ReportOptions

    check_outputs(output, html, force, (base, new))
    options = ReportOptions.parse(steps, window_nvtx, step_pattern)
    result = diff_runs(base, new, options, force=force, opener=opener)
    write_diff(result, fmt, output, force, console, html)
    if fail_on_regression is not None:
        code, line = gate(result, fail_on_regression, metric)
        print(line, file=sys.stderr)
        raise typer.Exit(code)


@app.command("check-claims")
@opens_reports
@takes_report_options
def check_claims(
    run: Annotated[
        str,
        typer.Argument(
            metavar="RUN",
            help="The run the text is about: a run directory, a quoted glob or a report .sqlite.",
        ),
    ],
    text: Annotated[
        str, typer.Argument(metavar="TEXT", help="File holding the text, or - to read stdin.")
    ],
    fmt: Fmt = Format.table,
    output: Output = None,
    force: Force = False,
    allow_unrelated: AllowUnrelated = False,
    options=None,
    opener=None,
) -> None:
    """Check each number a text states against the report of RUN.

    Every number with a unit, rank, step and phase in TEXT (an agent's answer) is looked
    up in the report's tables: held (which table and row) or not. Exit 3 when a claim
    is not held (1: bad input, 2: usage error). What it checks: docs/mcp.md."""
    from nsyswrap.agent.claims import check, claims_table, text_of
    from nsyswrap.report import report_of

    check_writable(output, force, [run] + ([text] if text != "-" else []))
    said = text_of(text)
    opener = replace(opener, allow_unrelated=allow_unrelated)
    found = check(report_of([run], options, opener=opener), said)
    if fmt is Format.json:
        import json

        out = json.dumps(found, indent=1) + "\n"
        if output is None:
            console.file.write(out)
        else:
            save(output, out)
    elif fmt is not Format.table or output is not None:
        write(claims_table(found), fmt, output, force, console)
    else:
        from nsyswrap.text_table import wrap

        for c in found["claims"]:
            head = f"{c['line']:>4}  {'held' if c['held'] else 'NOT HELD':<8}  "
            line = f"{c['claim']}: {c.get('held_by') or c.get('table') or c.get('why')}"
            print("\n".join(wrap(line, console.width, indent=" " * 16, first=head)))
        print(f"{len(found['claims'])} claims: {found['held']} held, {found['not_held']} not held")
    if found["not_held"]:
        raise typer.Exit(3)


@app.command("mcp")
@opens_reports
def mcp_server(opener=None) -> None:
    """Serve runs to an agent: a Model Context Protocol server on stdio.

    Its tools answer with the report's own tables: the diagnosis, any section or table,
    the what-if rows, the critical path, prebuilt queries, read-only SQL, diff and
    check-claims (docs/mcp.md). Needs the mcp extra: pip install 'nsyswrap[mcp]'."""
    from nsyswrap.agent.server import serve

    serve(opener)


@app.command()
@opens_reports
def timeline(
    reports: Reports,
    output: Annotated[
        Path,
        typer.Option(
            "--output",
            "-o",
            metavar="FILE",
            readable=False,
            help="Trace file to write (Chrome/Perfetto JSON; with --per-rank a TAR archive).",
        ),
    ],
    steps: Steps = None,
    window_nvtx: WindowNvtx = None,
    step_pattern: StepPattern = "step:%",
    max_events: Annotated[
        int | None,
        typer.Option(
            "--max-events",
            min=1,
            metavar="N",
            help="Keep at most this many events, longest first [default: 100,000].",
        ),
    ] = None,
    per_rank: Annotated[
        bool,
        typer.Option(
            "--per-rank",
            help="Write a TAR archive: a trace per rank on its own clock and a Perfetto "
            "manifest that lines them up by the fitted clock offsets.",
        ),
    ] = False,
    ideal: Annotated[
        bool,
        typer.Option(
            "--ideal",
            help="Add a track per rank: the steps as the replay times them with that rank "
            "idealised (crossrank.ideal_steps), above its recorded ones.",
        ),
    ] = False,
    force: Force = False,
    opener=None,
) -> None:
    """Write an aligned trace of all ranks for Perfetto.

    The trace opens in ui.perfetto.dev or chrome://tracing."""
    from nsyswrap.report import ReportOptions
    from nsyswrap.timeline import write_timeline

    limit = {} if max_events is None else {"max_events": max_events}
    events = write_timeline(
        reports,
        output,
        ReportOptions.parse(steps, window_nvtx, step_pattern),
        opener=opener,
        force=force,
        per_rank=per_rank,
        ideal=ideal,
        **limit,
    )
    print(f"wrote {output}: {events:,} events")


@app.command()
@opens_reports
@takes_report_options
def plan(
    reports: Reports,
    fmt: Fmt = Format.table,
    output: Output = None,
    force: Force = False,
    allow_unrelated: AllowUnrelated = False,
    options=None,
    opener=None,
) -> None:
    """Show what `nsyswrap report` would compute for REPORTS, what is stored, and why.

    Reads no report (only its header, to name its rank): the stored answer, the reports'
    views, then every step in order: per report (in the worker pool), on the run, and
    the results the report's sections ask for, each with what is stored of it."""
    from nsyswrap.report import explain

    check_writable(output, force, reports)
    found = explain(reports, options, opener=replace(opener, allow_unrelated=allow_unrelated))
    if fmt is not Format.table or output is not None:
        return write(found["steps"], fmt, output, force, console)
    from nsyswrap.text_table import wrap

    for line in found["summary"]:
        print("\n".join(wrap(line, console.width, indent="  ")))
    for r in found["steps"].itertuples(index=False):
        head = f"{r.stage:<10}  {r.name}" + (f" ({r.params})" if r.params else "")
        stored = "" if r.stored == "-" else f"stored {r.stored}, "
        todo = (
            f"computes {r.compute}"
            if r.stage == "per report"
            else ("computed" if r.compute == "yes" else "read from the store")
        )
        if r.stage == "connection":
            todo = "loaded on the connection"
        print(
            "\n".join(
                wrap(
                    f"{head}: {stored}{todo}; {r.why}",
                    console.width,
                    indent=" " * 17,
                    first=f"{r.step:>3}  ",
                )
            )
        )


cache_app = _Typer(
    help="Show or empty the cache (normalized views, stored results and answers).",
    no_args_is_help=True,
)
app.add_typer(cache_app, name="cache")


@cache_app.command("info")
def cache_info(
    fmt: Fmt = Format.table,
    cache_max: CacheMax = None,
) -> None:
    """What the cache holds: entries and bytes per kind, its cap and where it is."""
    from nsyswrap.storage import store

    table = store.info(cache_max or "")
    if fmt is not Format.table:
        return write(table["kinds"], fmt, None, False, console)
    from nsyswrap.text_table import wrap

    for line in table["summary"]:
        print("\n".join(wrap(line, console.width, indent="  ")))
    write(table["kinds"], fmt, None, False, console)


@cache_app.command("clear")
def cache_clear() -> None:
    """Remove every cache entry that no running nsyswrap is using."""
    from nsyswrap.storage import store

    removed, freed, kept = store.clear()
    print(
        f"removed {removed:,} entries ({store.human(freed)})"
        + (f"; {kept:,} in use kept" if kept else "")
    )


def _presets_help() -> str:
    from nsyswrap.synth.presets import PRESETS

    return (
        "\n\n".join(f"{name}: {about}" for name, (about, _) in PRESETS.items())
        + "\n\nA fault pair's name with --pair writes both halves."
    )


class _PresetsEpilog(_Command):
    """`generate --help` ends with the presets, loaded only when help is shown."""

    def format_epilog(self, ctx, formatter) -> None:
        self.epilog = _presets_help()
        super().format_epilog(ctx, formatter)


@app.command(cls=_PresetsEpilog)
def generate(
    scenario: Annotated[
        str,
        typer.Argument(
            metavar="SCENARIO", help="A preset (listed below) or a scenario / truth .json file."
        ),
    ],
    out: Annotated[
        Path,
        typer.Argument(
            metavar="OUT",
            readable=False,
            help="Directory for rank<N>.sqlite reports and truth.json.",
        ),
    ],
    ranks: Annotated[
        int | None, typer.Option("--ranks", min=1, metavar="N", help="Number of ranks.")
    ] = None,
    steps: Annotated[
        int | None, typer.Option("--steps", min=1, metavar="N", help="Training steps per rank.")
    ] = None,
    kernels_per_step: Annotated[
        int | None,
        typer.Option(
            "--kernels-per-step", min=1, metavar="N", help="Compute kernels per step and device."
        ),
    ] = None,
    seed: Annotated[int | None, typer.Option("--seed", metavar="N", help="Random seed.")] = None,
    pair: Annotated[
        bool,
        typer.Option(
            "--pair",
            help="SCENARIO is a fault pair: write OUT/fault and OUT/fixed (the same job "
            "without the fault), each with truth.json.",
        ),
    ] = False,
    force: Annotated[bool, typer.Option("--force", help="Replace reports already in OUT.")] = False,
) -> None:
    """Write synthetic reports with planted ground truth.

    One rank<N>.sqlite per rank and truth.json, for demos and tests."""
    sizes = {"ranks": ranks, "steps": steps, "kernels_per_step": kernels_per_step, "seed": seed}
    if pair:
        from nsyswrap.synth.pairs import write_fault_pair

        info = write_fault_pair(scenario, out, force=force, **sizes)
        difference = info["step_times"]["difference_per_step_ns"] / 1e6
        print(
            f"{out}/fault, {out}/fixed: the fixed run is {difference:.3f} ms per step faster "
            "(truth.json: pair)"
        )
        return
    from nsyswrap.storage.safe_output import refuse_input
    from nsyswrap.synth.run import TRUTH_FILE, generate_named

    refuse_input(out / TRUTH_FILE, [scenario], option="OUT")  # (a truth file as the scenario)
    truth = generate_named(scenario, out, force=force, **sizes)
    print(
        f"{out}: {len(truth.ranks)} reports, {sum(r['kernels'] for r in truth.ranks):,} kernels, "
        "truth.json"
    )


# --- launch and export (nsyswrap/launch/) ---------------------------------------------------------
LAUNCH_HELP = """Run training with the selected ranks under nsys.

Every selected rank runs under `nsys profile`; the reports are exported afterwards.

Put the command after --, e.g.
nsyswrap launch --annotate modules,collectives,steps --out runs/a -- torchrun --nproc-per-node 8 train.py

Works the same with srun and mpirun/mpiexec. Exits with the training's exit code.
"""  # noqa: E501  (the example command stays on one line)


LaunchOut = Annotated[
    Path | None,
    typer.Option(
        "--out",
        metavar="DIR",
        readable=False,
        help="Run directory for reports and manifest (default: runs/<time>).",
    ),
]

LaunchRanks = Annotated[
    str | None,
    typer.Option(
        "--ranks",
        metavar="LIST",
        help="Ranks to profile, e.g. 0,1,7 or 0-3 (default: all); each must be one the "
        "command starts.",
    ),
]

LaunchSteps = Annotated[
    str | None,
    typer.Option(
        "--steps",
        metavar="A:B",
        help="Capture only steps A to B-1 (steps from nsyswrap.step, else one per optimizer step).",
    ),
]

LaunchEvery = Annotated[
    int | None,
    typer.Option("--every", metavar="N", help="Capture the --steps window again every N steps."),
]

LaunchAnnotate = Annotated[
    str,
    typer.Option(
        "--annotate",
        metavar="KINDS",
        help="Annotate at start-up: modules, collectives, steps, "
        "sample (comma list) or all (the first three).",
    ),
]

LaunchTrace = Annotated[str, typer.Option("--trace", metavar="KINDS", help="nsys --trace value.")]

LaunchNsysArg = Annotated[
    list[str] | None,
    typer.Option(
        "--nsys-arg",
        metavar="OPTION",
        help="Extra nsys profile option, --name=value form (repeatable).",
    ),
]

LaunchForce = Annotated[bool, typer.Option("--force", help="Replace a run already in --out.")]

LaunchExport = Annotated[
    bool, typer.Option("--export/--no-export", help="Export the reports to SQLite afterwards.")
]

LaunchDryRun = Annotated[
    bool, typer.Option("--dry-run", help="Print each rank's command and stop.")
]

LaunchPrecompute = Annotated[
    bool,
    typer.Option(
        "--precompute",
        help="Each rank exports its report and computes its per-report results on its own "
        "node (cache on a shared file system).",
    ),
]

LaunchMemory = Annotated[
    bool,
    typer.Option(
        "--memory",
        help="Record GPU memory allocations (nsys --cuda-memory-usage=true) for the "
        "report's GPU memory table.",
    ),
]

LaunchSample = Annotated[
    bool,
    typer.Option(
        "--sample",
        help="Time every 10th step of every rank, its phases and collectives, into "
        "samples.rank<R>.jsonl in --out (CUDA events, or host timers without CUDA); without "
        "--ranks, --steps or --capture-when no rank runs under nsys.",
    ),
]

LaunchSampleEvery = Annotated[
    int | None,
    typer.Option(
        "--sample-every",
        metavar="N",
        help="Sample every Nth step (implies --sample) [default: 10].",
    ),
]

LaunchSampleSteps = Annotated[
    str | None,
    typer.Option(
        "--sample-steps",
        metavar="A:B",
        help="Sample only from step A to B-1 (A: to the end; implies --sample).",
    ),
]

LaunchCaptureWhen = Annotated[
    str | None,
    typer.Option(
        "--capture-when",
        metavar="RULE",
        help="Capture steps with nsys on --ranks (default all) "
        "when a sampled step takes more than K x the running median: slower=K[,steps=N]"
        "[,after=M][,captures=C] or a JSON file (implies --sample).",
    ),
]


@app.command(
    help=LAUNCH_HELP, context_settings={"allow_extra_args": True, "ignore_unknown_options": True}
)
def launch(
    ctx: typer.Context,
    out: LaunchOut = None,
    ranks: LaunchRanks = None,
    steps: LaunchSteps = None,
    every: LaunchEvery = None,
    annotate: LaunchAnnotate = "",
    trace: LaunchTrace = "cuda,nvtx,osrt",
    nsys_arg: LaunchNsysArg = None,
    nsys: NsysPath = "nsys",
    force: LaunchForce = False,
    export: LaunchExport = True,
    jobs: ExportJobs = None,
    dry_run: LaunchDryRun = False,
    precompute: LaunchPrecompute = False,
    memory: LaunchMemory = False,
    sample: LaunchSample = False,
    sample_every: LaunchSampleEvery = None,
    sample_steps: LaunchSampleSteps = None,
    capture_when: LaunchCaptureWhen = None,
) -> None:
    from datetime import datetime

    from nsyswrap.launch.config import LaunchConfig
    from nsyswrap.launch.run import launch as run_launch

    cfg = LaunchConfig.build(
        ctx.args,
        out=out or Path("runs") / datetime.now().strftime("%Y%m%d-%H%M%S"),
        ranks=ranks,
        steps=steps,
        every=every,
        trace=trace,
        nsys_args=nsys_arg or [],
        annotate=annotate,
        nsys=nsys,
        force=force,
        export=export,
        jobs=jobs,
        dry_run=dry_run,
        precompute=precompute,
        memory=memory,
        sample=sample,
        sample_every=sample_every,
        sample_steps=sample_steps,
        capture_when=capture_when,
    )
    raise typer.Exit(run_launch(cfg))


@app.command()
def export(
    run: Annotated[
        Path,
        typer.Argument(
            metavar="RUN", readable=False, help="Run directory (the --out of `nsyswrap launch`)."
        ),
    ],
    force: Annotated[
        bool, typer.Option("--force", help="Export again reports that already have a .sqlite.")
    ] = False,
    jobs: ExportJobs = None,
    nsys: NsysPath = "nsys",
) -> None:
    """Export a run's reports to SQLite (resumable).

    Each .nsys-rep of RUN gets a .sqlite beside it; reports already exported are skipped."""
    from nsyswrap.launch.export import export_run

    for path in export_run(run, force=force, jobs=jobs, nsys=nsys):
        print(printable(str(path)))


def main(argv: list[str] | None = None) -> None:
    """Entry point: bad input becomes one `Error: ...` line and exit code 1; a command
    whose cache entry was removed while it ran (`EntryGone`) runs once more."""
    fall_back_where_unencodable()
    try:
        try:
            app(args=argv, prog_name="nsyswrap")
        except Exception as exc:
            from nsyswrap.storage.store import gone

            removed = gone(exc) if not isinstance(exc, NsysWrapError) else exc
            if not isinstance(removed, EntryGone):
                raise
            note(f"{removed.where} was removed from the cache while in use; running again")
            app(args=argv, prog_name="nsyswrap")
    except NsysWrapError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    except Exception as exc:  # a full disk or the open files limit, met anywhere: one line
        limit = limit_error(exc)
        if limit is None:
            raise  # a bug in nsyswrap: its traceback
        print(f"Error: {limit}", file=sys.stderr)
        raise SystemExit(1) from None
