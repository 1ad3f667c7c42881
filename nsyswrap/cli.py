"""The `nsyswrap` command: a thin shell, one library call per command."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from nsyswrap import api
from nsyswrap.errors import NsysWrapError
from nsyswrap.output import Format, check_writable, write
from nsyswrap.run import Opener

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
Jobs = Annotated[int, typer.Option("--jobs", "-j", min=1, help="Reports normalized at a time (bounds memory).")]


def _opener(rank_pattern: str, jobs: int) -> Opener:
    """Reading options plus a progress bar on stderr while reports are normalized."""
    return Opener(rank_pattern=rank_pattern, jobs=jobs, progress=_progress_bar())


def _progress_bar():
    from rich.progress import Progress

    state: dict[str, object] = {}

    def advance(done: int, total: int) -> None:
        if "bar" not in state:
            bar = Progress(console=Console(stderr=True), transient=True)
            bar.start()
            state["bar"], state["task"] = bar, bar.add_task("reading reports", total=total)
        state["bar"].update(state["task"], completed=done)
        if done == total:
            state["bar"].stop()

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


def main(argv: list[str] | None = None) -> None:
    """Entry point: bad input becomes one `Error: ...` line and exit code 1."""
    try:
        app(args=argv, prog_name="nsyswrap")
    except NsysWrapError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
