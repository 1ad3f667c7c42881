"""The real captures the tests read: the project's H100/H200 runs (fixtures/real) and every
export in shared/nsys-sqlite (the public ones, the 5 ranks of the MPI Jacobi run alone and
together, the FSDP2 + NCCL captures), by name; those absent here are left out."""

from __future__ import annotations

from helpers.paths import FIXTURES, SHARED

EXPORTS = SHARED / "nsys-sqlite"
CAPTURES = {
    **{
        f"real/{p.name}": [p]
        for p in sorted((FIXTURES / "real").glob("*/"))
        if any(p.glob("*.sqlite"))
    },
    **{p.stem: [p] for p in sorted((EXPORTS / "public").glob("*.sqlite"))},
    **{f"mpi/{p.stem}": [p] for p in sorted((EXPORTS / "real-mpi").glob("*.sqlite"))},
    "mpi/all": [EXPORTS / "real-mpi"],
    "fsdp/fsdp2_nccl1": [EXPORTS / "real-fsdp" / "fsdp2_nccl1.sqlite"],
    "fsdp/launched": [EXPORTS / "real-fsdp" / "launched"],
    "fsdp/memory": [EXPORTS / "real-fsdp" / "memory" / "fsdp2_nccl1_memory.sqlite"],
}
CAPTURES = {k: v for k, v in CAPTURES.items() if all(p.exists() for p in v)}
