"""NCCL's own NVTX payloads: collective keys by communicator, and ranks from ncclCommInitRank.

NCCL (2.19 and later) opens a push/pop range in domain `NCCL` around each API call
(`ncclAllReduce`, `ncclCommInitRank`, ...) with an extended payload: the C struct of
its `src/include/nvtx_payload_schemas.h` (communicator hash, message size, reduction op;
ncclCommInitRank: new comm, nranks, myrank, CUDA device). nsys 2026.2 exports the schemas
(view `payload_schemas`) and, only with `nsys export --include-blobs=true`, the bytes
(`NVTX_EVENTS.binaryData`, view `nvtx_payloads`): a 32-byte header of little-endian
uint64 (domain id, schema id, payload size, a fourth field not relied on), then the
payload. Entries are decoded at the offsets and types the exported schema gives, found
by their names, so NCCL versions that number schemas differently decode alike; only
where the export has no schema for a blob (nsys before 2026.2 has no schema tables) is
NCCL's own struct layout assumed (NCCL_LAYOUT). docs/nccl-payloads.md has the sources
and what is still unknown.

Collective k on communicator H is the k-th call with comm H on each member (pg
`nccl:<H in hex>`); its group size is the nranks of H's ncclCommInitRank when captured.
Point-to-point calls (ncclSend/ncclRecv) are not keyed here.
"""

from __future__ import annotations

import struct

import pandas as pd

HEADER = struct.Struct("<QQQQ")  # domain id, schema id, payload size, (unused)
COMM, NRANKS, RANK, MSG = "NCCL communicator ID", "No. of ranks", "Rank", "Message size [bytes]"
# NVTX_PAYLOAD_ENTRY_TYPE_* -> struct format (LP64: long is 8 bytes)
FORMATS = {
    1: "b",
    2: "B",
    3: "h",
    4: "H",
    5: "i",
    6: "I",
    7: "q",
    8: "Q",
    9: "q",
    10: "Q",
    11: "b",
    12: "B",
    13: "h",
    14: "H",
    15: "i",
    16: "I",
    17: "q",
    18: "Q",
    19: "f",
    20: "d",
    22: "Q",
    23: "Q",
}
SCHEMA_ID_STATIC_START = 1 << 24
ENUM_FORMAT = "i"  # a registered enum (type >= 2^24, e.g. NCCL's ncclRedOp_t): a C enum, 4 bytes
INIT_OPS = ("comm_init_rank", "comm_init_rank_config", "comm_init_rank_scalable", "comm_split")
# NCCL's structs (src/include/nvtx_payload_schemas.h), for blobs the export has no schema for:
# by op, the entries nsyswrap reads (name, type, offset)
_INIT = [(COMM, 18, 0), (NRANKS, 5, 8), (RANK, 5, 12)]
NCCL_LAYOUT = {
    **{op: _INIT for op in INIT_OPS[:3]},
    "comm_split": [(COMM, 18, 0), (NRANKS, 5, 16), (RANK, 5, 20)],
}
COLLECTIVE_LAYOUT = [(COMM, 18, 0), (MSG, 22, 8)]
NO_BLOBS = (
    "NCCL's NVTX ranges carry no payloads in these exports (binaryData NULL: export with "
    "nsys 2024.6.2+ `nsys export --include-blobs=true`)"
)
BY_LAYOUT = (
    "payloads decoded by NCCL's struct layout where the export has no payload schema "
    "(NVTX_PAYLOAD_SCHEMAS: nsys 2026.2+)"
)


class PayloadError(ValueError):
    """A binaryData blob that does not decode (too short, or shorter than it says)."""


def split(blob: bytes) -> tuple[int, int, bytes]:
    """(domain id, schema id, payload bytes) of one binaryData blob."""
    if len(blob) < HEADER.size:
        raise PayloadError(f"{len(blob)} bytes, shorter than the {HEADER.size}-byte header")
    domain, schema, size, _ = HEADER.unpack_from(blob)
    if HEADER.size + size > len(blob):
        raise PayloadError(f"says {size} payload bytes but holds {len(blob) - HEADER.size}")
    return domain, schema, blob[HEADER.size : HEADER.size + size]


def decode(payload: bytes, entries: list[tuple[str, int, int]]) -> dict[str, int | float]:
    """The values of `payload` by schema `entries` (name, type, offset); entries of types
    nsyswrap does not read (strings, arrays, nested schemas) are left out."""
    out = {}
    for name, kind, offset in entries:
        fmt = FORMATS.get(kind, ENUM_FORMAT if kind >= SCHEMA_ID_STATIC_START else None)
        if fmt is not None and offset + struct.calcsize(fmt) <= len(payload):
            out[name] = struct.unpack_from("<" + fmt, payload, offset)[0]
    return out


def schema_entries(schemas: pd.DataFrame) -> dict[tuple[int, int, int], list[tuple[str, int, int]]]:
    """(report rank, domain id, schema id) -> entries (name, type, offset) in index order,
    from the `payload_schemas` view."""
    out: dict[tuple[int, int, int], list[tuple[str, int, int]]] = {}
    for row in schemas.sort_values(["rank", "domain_id", "schema_id", "idx"]).itertuples(
        index=False
    ):
        out.setdefault((int(row.rank), int(row.domain_id), int(row.schema_id)), []).append(
            (row.name, int(row.type), int(row.offset_bytes))
        )
    return out


def decoded(calls: pd.DataFrame, schemas: pd.DataFrame) -> pd.DataFrame:
    """`calls` (xr_rank_keys rows of kind nccl) with a payload that decodes, plus columns
    comm, bytes, nranks, myrank (NULL where the schema has no such entry) and how decoded
    (`by`: schema or layout)."""
    entries = schema_entries(schemas)
    rows = []
    for i, (rank, op, blob) in enumerate(zip(calls["rank"], calls["op"], calls["payload"])):
        if blob is None or pd.isna(blob):
            continue
        try:
            domain, schema, payload = split(bytes(blob))
        except PayloadError:
            continue
        fields = entries.get((int(rank), domain, schema))
        if fields is None:  # domain ids are per process: a schema id alone is NCCL's too
            fields = next(
                (v for (r, _, s), v in entries.items() if r == int(rank) and s == schema), None
            )
        by = "schema" if fields is not None else "layout"
        values = decode(
            payload, fields if fields is not None else NCCL_LAYOUT.get(op, COLLECTIVE_LAYOUT)
        )
        rows.append(
            (i, values.get(COMM), values.get(MSG), values.get(NRANKS), values.get(RANK), by)
        )
    found = pd.DataFrame(rows, columns=["i", "comm", "bytes_", "nranks", "myrank", "by"])
    out = calls.iloc[found["i"].to_numpy()].reset_index(drop=True)
    return out.assign(
        comm=found["comm"].to_numpy(),
        payload_bytes=found["bytes_"].to_numpy(),
        nranks=found["nranks"].to_numpy(),
        myrank=found["myrank"].to_numpy(),
        by=found["by"].to_numpy(),
    )


def payload_keys(keys: pd.DataFrame, schemas: pd.DataFrame) -> tuple[pd.DataFrame, str | None]:
    """(`keys` with NCCL's ranges replaced by collective keys of kind `payload`, a note
    for the groups: why none were made when NCCL ranges are there but give no keys, or
    that some were decoded by NCCL's layout rather than the export's schema)."""
    nccl = keys[keys["keyed"] == "nccl"]
    rest = keys[keys["keyed"] != "nccl"].drop(columns=["payload"], errors="ignore")
    if nccl.empty:
        return rest, None
    calls = decoded(nccl, schemas)
    calls = calls[calls["comm"].notna()]
    inits = calls[calls["op"].isin(INIT_OPS)]
    colls = calls[~calls["op"].isin(INIT_OPS)].sort_values(["rank", "pid", "cpu_start_ns", "seq"])
    if colls.empty:
        return rest, NO_BLOBS if calls.empty else None
    size = inits.groupby("comm")["nranks"].max()
    colls = colls.assign(
        pg="nccl:" + colls["comm"].map(lambda c: f"{int(c):016x}"),
        bytes=colls["payload_bytes"].astype("Int64"),
        group_size=colls["comm"].map(size).astype("Int64"),
        keyed="payload",
    )
    colls["seq"] = colls.groupby(["rank", "pid", "pg"]).cumcount()
    note = BY_LAYOUT if (calls["by"] == "layout").any() else None
    return pd.concat([rest, colls[rest.columns]], ignore_index=True), note


def world_ranks(keys: pd.DataFrame, schemas: pd.DataFrame) -> pd.DataFrame:
    """(rank = report rank, pid, world_rank, nranks) per process with a ncclCommInitRank
    payload: myrank in its largest communicator (the world's)."""
    inits = keys[(keys["keyed"] == "nccl") & keys["op"].isin(INIT_OPS)]
    calls = decoded(inits, schemas).dropna(subset=["nranks", "myrank"])
    if calls.empty:
        return pd.DataFrame(columns=["rank", "pid", "world_rank", "nranks"])
    top = calls.sort_values(
        ["rank", "pid", "nranks", "cpu_start_ns"], ascending=[True, True, False, True]
    )
    top = top.groupby(["rank", "pid"], as_index=False).first()
    return pd.DataFrame(
        {
            "rank": top["rank"].astype(int),
            "pid": top["pid"].astype("int64"),
            "world_rank": top["myrank"].astype(int),
            "nranks": top["nranks"].astype(int),
        }
    )
