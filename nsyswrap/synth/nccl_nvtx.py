"""NCCL's own NVTX ranges with their extended payloads, as an nsys 2026.2 export holds them
when exported with `--include-blobs=true` (see docs/nccl-payloads.md).

Each range carries the C struct of NCCL's `src/include/nvtx_payload_schemas.h` for its
call (communicator hash, message size, reduction op; for ncclCommInitRank: new comm,
nranks, myrank, CUDA device) in `NVTX_EVENTS.binaryData`, behind a 32-byte header
(domain id, schema id, payload size, payload offset; little-endian uint64 each). The
schemas are rows of NVTX_PAYLOAD_SCHEMAS / NVTX_PAYLOAD_SCHEMA_ENTRIES as a real 2026.2
export has them: schema id = 2^24 + NCCL's static id, type 1 (static), the first entry's
offset NULL, names NCCL's, one copy of the rows per process of the report.
"""

from __future__ import annotations

import struct

import numpy as np

from nsyswrap.synth.trace import NCCL_DOMAIN

STATIC_START = 1 << 24  # NVTX_PAYLOAD_ENTRY_TYPE_SCHEMA_ID_STATIC_START
INT, UINT64, SIZE = 5, 18, 22  # NVTX_PAYLOAD_ENTRY_TYPE_*
REDOP = STATIC_START + 24  # NCCL's enum schema of ncclRedOp_t (4 bytes)
SUM = 0  # ncclSum
# Written here apart from nsyswrap.crossrank.nccl_payload, which reads the same layout: the
# generator stays free of the analysis (and of pandas).
HEADER = struct.Struct("<QQQQ")
WORLD_PG = 1000  # pg id of the world communicator when tp > 0
COMM, NRANKS, RANK, DEVICE = "NCCL communicator ID", "No. of ranks", "Rank", "CUDA device"
MSG, OP = "Message size [bytes]", "Reduction operation"
# call -> (NCCL static schema id, payload size, entries (name, type, offset, struct format))
SCHEMAS = {
    "ncclCommInitRank": (
        0,
        24,
        [
            (COMM, UINT64, 0, "Q"),
            (NRANKS, INT, 8, "i"),
            (RANK, INT, 12, "i"),
            (DEVICE, INT, 16, "i"),
        ],
    ),
    "ncclAllGather": (4, 16, [(COMM, UINT64, 0, "Q"), (MSG, SIZE, 8, "Q")]),
    "ncclAllReduce": (5, 24, [(COMM, UINT64, 0, "Q"), (MSG, SIZE, 8, "Q"), (OP, REDOP, 16, "i")]),
    "ncclBroadcast": (6, 24, [(COMM, UINT64, 0, "Q"), (MSG, SIZE, 8, "Q"), ("Root", INT, 16, "i")]),
    "ncclReduceScatter": (
        7,
        24,
        [(COMM, UINT64, 0, "Q"), (MSG, SIZE, 8, "Q"), (OP, REDOP, 16, "i")],
    ),
}


def schema_id(call: str) -> int:
    return STATIC_START + SCHEMAS[call][0]


def blob(call: str, values: dict[str, int], domain: int = NCCL_DOMAIN) -> bytes:
    """binaryData of one `call` range: the header, then the payload struct (zero padded)."""
    _, size, entries = SCHEMAS[call]
    payload = bytearray(size)
    for name, _, offset, fmt in entries:
        struct.pack_into("<" + fmt, payload, offset, values[name])
    return HEADER.pack(domain, schema_id(call), size, HEADER.size) + bytes(payload)


def schema_rows(calls: set[str], domain: int = NCCL_DOMAIN) -> tuple[list[tuple], list[tuple]]:
    """(NVTX_PAYLOAD_SCHEMAS rows, NVTX_PAYLOAD_SCHEMA_ENTRIES rows) of the schemas of
    `calls`, in their real column order."""
    schemas, entries = [], []
    for call in sorted(calls, key=schema_id):
        _, size, fields = SCHEMAS[call]
        schemas.append((domain, schema_id(call), None, 1, None, len(fields), size, None))
        entries += [
            (domain, schema_id(call), i, None, kind, name, None, None, offset or None)
            for i, (name, kind, offset, _) in enumerate(fields)
        ]
    return schemas, entries


def comm_hash(seed: int, pg: int) -> int:
    """A communicator's 64-bit hash (NCCL's commHash): the same on every member."""
    return int(np.random.default_rng([seed, 99, pg]).integers(1, 2**63))


def communicators(sc, rank: int) -> list[tuple[int, list[int]]]:
    """(pg, members) of every communicator `rank` belongs to: the world first."""
    if not sc.tp:
        return [(0, list(range(sc.ranks)))]
    return [
        (WORLD_PG, list(range(sc.ranks))),
        (sc.tp_group(rank), sc.group_members(sc.tp_group(rank))),
        (sc.dp_group(rank), sc.group_members(sc.dp_group(rank))),
    ]


def push(tl, call: str, values: dict[str, int]) -> None:
    """Open NCCL's range of `call` (domain NCCL, registered string) carrying its payload."""
    tl.push(call, NCCL_DOMAIN)
    tl.trace.nvtx_payloads[len(tl.trace.nvtx) - 1] = blob(call, values)


def init_communicators(tl, sc, rank: int, device: int) -> None:
    """ncclCommInitRank of each of `rank`'s communicators (PyTorch makes them lazily, at
    the first collective)."""
    for pg, members in communicators(sc, rank):
        push(
            tl,
            "ncclCommInitRank",
            {
                COMM: comm_hash(sc.seed, pg),
                NRANKS: len(members),
                RANK: members.index(rank),
                DEVICE: device,
            },
        )
        tl.host(50_000)
        tl.pop()


def collective_values(sc, pg: int, nbytes: int) -> dict[str, int]:
    return {COMM: comm_hash(sc.seed, pg), MSG: nbytes, OP: SUM, "Root": 0}
