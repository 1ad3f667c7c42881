"""What the advice on some devices cites besides their totals, from the report's tables:
the copies and their memory kinds, pinned allocations, CUDA graphs, launches, the host
work behind long idle gaps, the most exposed NCCL kernel."""

from __future__ import annotations

from dataclasses import dataclass, field

from nsyswrap.report.diagnosis.facts import Facts, Key
from nsyswrap.report.diagnosis.words import ms
from nsyswrap.report.figures import value


@dataclass
class Evidence:
    """What the recommendations cite besides the totals."""

    top_exposed: str | None = None  # "AllReduce in bwd:layers.3 (step 2), 1.2 ms exposed"
    same_stream: list[str] = field(default_factory=list)  # "rank 0 device 1": NCCL on compute
    ranks: int = 1
    kernels: int = 0
    tiny_kernels: int = 0  # shorter than rule host_idle_advice's tiny_kernel_ns
    frameworks: frozenset[str] = frozenset()  # seen: pytorch, nccl, ddp, fsdp, inductor
    host_copies: int = 0  # copies between host and device memory
    host_copy_bytes: int = 0  # their bytes
    pageable_copies: int | None = None  # of them, from or to pageable memory (None: unknown)
    pageable_bytes: int | None = None  # their bytes (None: unknown)
    host_alloc_calls: int = 0  # cudaHostAlloc / cudaMallocHost / cudaHostRegister
    graph_launches: int = 0  # cudaGraphLaunch calls: the program replays CUDA graphs
    # the host-caused idle in long gaps (rule host_idle_advice), by the host work covering
    # them: (source: nvtx, mpi, cuda, osrt or none; name; ns), scaled as the totals are
    host_work: list[tuple[str, str | None, float]] = field(default_factory=list)
    basis: str = ""  # what the totals are: "per step", "over the window"
    gpus: int = 1  # how many GPUs (or ranks: unit) the totals are each the mean of
    unit: str = "GPU"  # `rank` where ranks share a physical GPU (Facts.unit)

    @property
    def pytorch(self) -> bool:
        return "pytorch" in self.frameworks

    @property
    def compiled(self) -> bool:
        """Whether torch.compile compiled the program (Inductor's triton_* kernels)."""
        return "inductor" in self.frameworks

    def amount(self, ns: float) -> str:
        """A duration of the totals, saying what it is: `1.23 ms per step per GPU` (`per
        rank` where the ranks share a GPU)."""
        each = f"per {self.unit}" if self.gpus > 1 else ""
        return " ".join(filter(None, (ms(ns), self.basis, each)))


def evidence_of(facts: Facts, keys: list[Key], factor: float = 1.0, basis: str = "") -> Evidence:
    """What the advice on devices `keys` cites; times of the devices scaled by `factor`
    as their totals are (`basis` says how)."""
    ranks = {k[0] for k in keys}

    def mine(table: str) -> list[dict]:
        return [r for r in facts.rows("single_rank", table) if (r["rank"], r.get("device")) in keys]

    e = Evidence(
        ranks=len(ranks),
        frameworks=facts.frameworks,
        basis=basis,
        gpus=len(keys),
        unit=facts.unit(keys),
        host_alloc_calls=sum(
            value(r["calls"], 0) for r in facts.rows("trace", "host_alloc") if r["rank"] in ranks
        ),
        graph_launches=sum(
            value(r["graph_launches"], 0)
            for r in facts.rows("trace", "graphs")
            if r["rank"] in ranks
        ),
        kernels=sum(value(r["kernels"], 0) for r in mine("launches")),
        tiny_kernels=sum(value(r["tiny_kernels"], 0) for r in mine("launches")),
        **_host_copies(facts, ranks),
    )
    work: dict[tuple, float] = {}
    for r in mine("host_work"):
        key = (r["source"], r["host_work"])
        work[key] = work.get(key, 0) + value(r["idle"], 0) * factor
    e.host_work = [(src, name, ns) for (src, name), ns in work.items()]
    exposed = [r for r in mine("top_exposed") if value(r["exposed"], 0) > 0]
    if exposed:
        e.top_exposed = _most_exposed(exposed[0])
        e.same_stream = sorted(
            {f"rank {r['rank']} device {r['device']}" for r in exposed if r.get("compute_stream")}
        )
    return e


def _host_copies(facts: Facts, ranks: set[int]) -> dict:
    """The copies between host and device of `ranks`, and of them the pageable ones (None
    where no copy's memory kind is known)."""
    copies = [
        r
        for r in facts.rows("trace", "copies")
        if r["rank"] in ranks and r["kind"] in ("HtoD", "DtoH")
    ]
    pageable = [r for r in copies if "Pageable" in (r["src"], r["dst"])]
    known = any(r["src"] != "Unknown" for r in copies)
    return {
        "host_copies": sum(value(r["copies"], 0) for r in copies),
        "host_copy_bytes": sum(value(r.get("bytes"), 0) for r in copies),
        "pageable_copies": sum(value(r["copies"], 0) for r in pageable) if known else None,
        "pageable_bytes": sum(value(r.get("bytes"), 0) for r in pageable) if known else None,
    }


def _most_exposed(r: dict) -> str:
    """`AllReduce on rank 0 device 1 in bwd:layers.3 (step 2), 1.20 ms exposed`."""
    where = f" in {r['context']}" if r.get("context") else ""
    step = f" (step {value(r['step'])})" if value(r["step"]) is not None else ""
    return (
        f"{r['kernel']} on rank {r['rank']} device {r['device']}{where}{step}, "
        f"{ms(value(r['exposed'], 0))} exposed"
    )
