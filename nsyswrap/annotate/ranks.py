"""Which rank and host a process is (from the launcher's environment) and `--ranks`
selections."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

from nsyswrap.errors import NsysWrapError

# torchrun first: under `srun ... torchrun`, SLURM_PROCID numbers nodes, RANK numbers ranks.
RANK_VARIABLES = ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK")


def short_host() -> str:
    """This machine's host name without its domain."""
    return socket.gethostname().split(".")[0] or "localhost"


def env_rank(environ: Mapping[str, str] = os.environ) -> int | None:
    """The global rank set by torchrun, srun, Open MPI or MPICH; None outside a launcher."""
    for name in RANK_VARIABLES:
        value = environ.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return None


MAX_RANK = 2**31 - 1  # ranks are 32-bit integers (MPI, torch.distributed)
MAX_SELECTED = 1 << 16
"""At most this many ranks are selected by --ranks: each selected rank writes a report (a
run of all ranks leaves --ranks out)."""


def parse_ranks(text: str, where: str = "--ranks") -> frozenset[int]:
    """'0,1,7' or '0-3,8' -> {0, 1, 7} / {0, 1, 2, 3, 8}."""
    spans = []
    for part in text.split(","):
        low, dash, high = part.strip().partition("-")
        if not low.isdigit() or (dash and not high.isdigit()) or (dash and int(high) < int(low)):
            raise NsysWrapError(
                where, f"{text!r} is not a list of ranks", "write e.g. 0,1,7 or 0-3,8"
            )
        spans.append((int(low), int(high or low)))
    if max(high for _, high in spans) > MAX_RANK:
        raise NsysWrapError(
            where, f"{text!r} names a rank above {MAX_RANK:,}", "ranks are 32-bit numbers"
        )
    selected = sum(high - low + 1 for low, high in spans)  # (counted before any set is built)
    if selected > MAX_SELECTED:
        raise NsysWrapError(
            where,
            f"{text!r} selects {selected:,} ranks, more than nsyswrap "
            f"profiles at once ({MAX_SELECTED:,})",
            "leave --ranks out to profile every rank, or select fewer",
        )
    return frozenset(r for low, high in spans for r in range(low, high + 1))


def format_ranks(ranks) -> str:
    """{0, 1, 2, 3, 8} -> '0-3,8': a selection as `parse_ranks` reads it, short however many."""
    spans: list[list[int]] = []
    for r in sorted(ranks):
        if spans and r == spans[-1][1] + 1:
            spans[-1][1] = r
        else:
            spans.append([r, r])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)
