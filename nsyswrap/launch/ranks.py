"""Which rank a process is (from the launcher's environment) and `--ranks` selections."""
from __future__ import annotations

import os
from typing import Mapping, Optional

from nsyswrap.errors import NsysWrapError

# torchrun first: under `srun ... torchrun`, SLURM_PROCID numbers nodes, RANK numbers ranks.
RANK_VARIABLES = ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK")


def env_rank(environ: Mapping[str, str] = os.environ) -> Optional[int]:
    """The global rank set by torchrun, srun, Open MPI or MPICH; None outside a launcher."""
    for name in RANK_VARIABLES:
        value = environ.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return None


def parse_ranks(text: str, where: str = "--ranks") -> frozenset[int]:
    """'0,1,7' or '0-3,8' -> {0, 1, 7} / {0, 1, 2, 3, 8}."""
    ranks: set[int] = set()
    for part in text.split(","):
        low, dash, high = part.strip().partition("-")
        if not low.isdigit() or (dash and not high.isdigit()) or (dash and int(high) < int(low)):
            raise NsysWrapError(where, f"{text!r} is not a list of ranks", "write e.g. 0,1,7 or 0-3,8")
        ranks.update(range(int(low), int(high or low) + 1))
    return frozenset(ranks)
