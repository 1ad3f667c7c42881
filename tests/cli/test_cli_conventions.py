"""CLI conventions: version, workflow order, light help, did-you-mean, whole descriptions,
`launch --ranks` checked against the ranks the command starts."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from helpers.paths import FIXTURES, ROOT


def test_list_shows_whole_descriptions(cli):
    code, out, _ = cli("list")
    assert code == 0 and max(map(len, out.splitlines())) <= 80
    assert "the rank whose lateness cost the others the most wait" in " ".join(out.split())


def test_unknown_query_suggests_a_name(cli):
    code, _, err = cli("query", "kernels.sumary", FIXTURES / "run2")
    assert code == 1 and "did you mean kernels.summary or" in err


def test_version(cli):
    import nsyswrap

    code, out, _ = cli("--version")
    assert code == 0 and out.strip() == f"nsyswrap {nsyswrap.__version__}"


def test_help_imports_no_heavy_module_and_lists_the_workflow_order():
    probe = (
        "import sys; from nsyswrap.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print([m for m in ('pandas', 'duckdb', 'pyarrow', 'numpy') if m in sys.modules])"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True
    ).stdout
    assert out.strip().endswith("[]")
    listed = re.findall(r"^  (\w+) ", out.split("Commands:")[1], re.M)
    order = [
        "launch",
        "export",
        "report",
        "diff",
        "timeline",
        "mcp",
        "query",
        "sql",
        "list",
        "views",
        "plan",
        "cache",
        "generate",
    ]
    assert listed == [c for c in order if c in listed] and len(listed) >= 9
    assert "list[" not in out and "<str>" not in out


def test_launch_refuses_ranks_the_command_does_not_start(cli, tmp_path):
    pytest.importorskip("torch", reason="reading torchrun's options needs torch")
    code, out, err = cli(
        "launch",
        "--ranks",
        "0,5",
        "--dry-run",
        "--out",
        tmp_path / "run",
        "--",
        "torchrun",
        "--nproc-per-node",
        "2",
        "train.py",
    )
    assert code == 1 and "rank(s) 5" in err and "starts 2 rank(s)" in err
    assert not (tmp_path / "run").exists()


def test_usage_names_values_not_python_types(cli):
    import typer

    from nsyswrap.cli import app

    commands = [[c] for c in typer.main.get_command(app).commands]
    for command in [*commands, ["cache", "info"], ["cache", "clear"]]:
        code, out, _ = cli(*command, "--help")
        assert code == 0
        assert not re.search(r"<(list\[|str>|int|path>|bool>)", out), command
    code, out, _ = cli("diff", "--help")  # arguments by their metavars, in their own section
    assert re.search(r"Arguments:\n  BASE  BASE run: .*\n(.*\n)*  NEW   NEW run, the same way", out)


def test_no_function_of_typer_or_click_is_replaced():
    """Importing the CLI patches no dependency (issue 25: no patch of a dependency's
    private code): every function of typer's and click's modules and classes is their
    own; what nsyswrap changes (help that names arguments by their metavars, the command
    order) is in its own subclasses (nsyswrap.cli._Command, _WorkflowOrder)."""
    import nsyswrap.cli  # noqa: F401

    patched = []
    for name, module in list(sys.modules.items()):
        if module is None or name.split(".")[0] not in ("typer", "click"):
            continue
        for attr, value in list(vars(module).items()):
            found = [(attr, value)]
            if isinstance(value, type) and value.__module__ == name:
                found += [(f"{attr}.{k}", v) for k, v in vars(value).items()]
            patched += [
                f"{name}.{where}"
                for where, v in found
                if callable(v) and str(getattr(v, "__module__", "")).startswith("nsyswrap")
            ]
    assert not patched


@pytest.mark.parametrize(
    "command", ["report", "diff", "timeline", "check-claims", "mcp", "query", "sql", "plan"]
)
def test_every_command_that_opens_reports_takes_the_engine_options(command):
    """Defined once (nsyswrap.cli.ENGINE_OPTIONS), the same on every such command."""
    import typer

    from nsyswrap.cli import ENGINE_OPTIONS, app

    group = typer.main.get_command(app)
    options = {
        o for p in group.commands[command].params if p.param_type_name == "option" for o in p.opts
    }
    assert {
        "--rank-pattern",
        "--jobs",
        "--engine",
        "--scheduler-file",
        "--scheduler-address",
        "--cache-max",
    } <= options
    assert len(ENGINE_OPTIONS) == 6


@pytest.mark.parametrize("command", ["report", "plan"])
def test_report_and_plan_take_the_same_report_options(command):
    """Defined once (nsyswrap.cli.REPORT_OPTIONS): the plan of a report is planned with
    every option the report takes."""
    import typer

    from nsyswrap.cli import REPORT_OPTIONS, app

    group = typer.main.get_command(app)
    names = {p.name for p in group.commands[command].params}
    assert set(REPORT_OPTIONS) <= names
