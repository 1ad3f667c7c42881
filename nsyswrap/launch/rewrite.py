"""Put the per-rank wrapper in front of every rank's program in a launch command.

torchrun (or `python -m torch.distributed.run`) gets `--no-python <wrapper> <python> -u script`;
srun and mpirun/mpiexec get the wrapper before their program (a launcher inside them, like
`srun ... torchrun ...`, is rewritten in turn); any other command is a single rank.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from nsyswrap.errors import NsysWrapError

TORCHRUN_MODULES = ("torch.distributed.run", "torch.distributed.launch")
# Options that take a separate value (a count says how many); others are flags or --name=value.
SRUN_VALUES = {
    o: 1 for o in "-A -b -c -d -D -e -G -i -J -L -m -M -n -N -o -p -q -S -t -T -w -x".split()
}
MPI_VALUES = {
    **{
        o: 1
        for o in (
            "-n -np -c -H -host --host -hostfile --hostfile -machinefile --machinefile -x "
            "--map-by -map-by --bind-to -bind-to --rank-by -npernode --npernode -N -wdir --wdir "
            "-f -ppn -hosts -genvlist"
        ).split()
    },
    **{o: 2 for o in "--mca -mca -gmca --gmca -genv -env".split()},
}
COUNT_OPTIONS = {"srun": ("-n", "--ntasks"), "mpi": ("-n", "-np", "-c")}


def rewrite(command: list[str], wrapper: list[str]) -> tuple[list[str], int | None]:
    """(command with `wrapper` before each rank's program, number of ranks if the command says)."""
    name = Path(command[0]).name
    if name == "torchrun":
        return _torchrun(command[:1], command[1:], wrapper, _script_python(command[0]))
    if len(command) > 2 and command[1] == "-m" and command[2] in TORCHRUN_MODULES:
        return _torchrun(command[:3], command[3:], wrapper, command[0])
    if name == "srun":
        return _around_program(command, wrapper, SRUN_VALUES, COUNT_OPTIONS["srun"])
    if name in ("mpirun", "mpiexec", "orterun"):
        return _around_program(command, wrapper, MPI_VALUES, COUNT_OPTIONS["mpi"])
    return wrapper + command, None


def _torchrun(head: list[str], args: list[str], wrapper: list[str], python: str):
    try:
        from torch.distributed.run import get_args_parser
    except ImportError:
        raise NsysWrapError(
            head[-1],
            "needs torch importable by nsyswrap's Python to read its options",
            f"install torch for {sys.executable}",
        ) from None
    try:
        ns = get_args_parser().parse_args(args)
    except SystemExit:
        raise NsysWrapError(
            " ".join(head),
            "could not read these torchrun options",
            "check them with torchrun --help",
        ) from None
    script_at = len(args) - len(ns.training_script_args) - 1
    options = [
        a for a in args[:script_at] if a not in ("-m", "--module", "--no-python", "--no_python")
    ]
    if ns.no_python:
        program = [ns.training_script]
    else:
        program = [python, "-u", *(["-m"] if ns.module else []), ns.training_script]
    low, _, high = str(ns.nnodes).partition(":")  # --nnodes N or MIN:MAX
    nodes, per_node = (low if high in ("", low) else ""), str(ns.nproc_per_node)
    ranks = int(nodes) * int(per_node) if nodes.isdigit() and per_node.isdigit() else None
    return head + options + ["--no-python"] + wrapper + program + list(
        ns.training_script_args
    ), ranks


def _script_python(script: str) -> str:
    """The interpreter torchrun would use for the training script: PYTHON_EXEC, else torchrun's
    own."""
    if os.environ.get("PYTHON_EXEC"):
        return os.environ["PYTHON_EXEC"]
    path = shutil.which(script)
    try:
        first = Path(path).read_bytes()[:512].split(b"\n", 1)[0].decode() if path else ""
    except (OSError, UnicodeDecodeError):
        first = ""
    words = first[2:].split() if first.startswith("#!") else []
    if words and Path(words[0]).name == "env":
        words = words[1:]
    if words and Path(words[0]).name.startswith("python"):
        return shutil.which(words[0]) or words[0]
    return sys.executable


def _around_program(command: list[str], wrapper: list[str], values: dict, count_options):
    at, i, ranks = None, 1, None
    while i < len(command):
        token = command[i]
        if token.startswith("-"):
            name, eq, value = token.partition("=")
            taken = 0 if eq else values.get(name, 0)
            if name in count_options:
                value = value if eq else (command[i + 1] if i + 1 < len(command) else "")
                ranks = int(value) if value.isdigit() else ranks
            i += 1 + taken
        elif shutil.which(token) or Path(token).is_file():
            at = i
            break
        else:
            i += 1  # the value of an option this table does not know
    if at is None:
        raise NsysWrapError(
            " ".join(command[:3]),
            "no program to run was found in this command",
            f"put the program right after {Path(command[0]).name}'s options, e.g. "
            f"{Path(command[0]).name} -n 2 python train.py",
        )
    inner, inner_ranks = rewrite(command[at:], wrapper)
    return command[:at] + inner, inner_ranks or ranks
