"""The links between hosts: each pair of hosts' bus bandwidth against the same run's inside a
host and an expectation, and what bringing a slow link to a healthy bandwidth saves, replayed
(nsyswrap.crossrank.replay over the model of nsyswrap.crossrank.lanes); the run object
`xr_links`, made with the replay's (nsyswrap.crossrank.whatif).

* **A link's bandwidth.** A collective crosses every pair of the hosts its members are on
  (`xr_link_collectives`: its bus bandwidth, NCCL's busBw, where its bytes are recorded).
  A pair's bus bandwidth is that of its collectives of at least MIN_BYTES (smaller ones
  are latency-bound; where it has none, all of them, and the link is not judged slow),
  weighted by their transfer times: the bytes they moved over the time they took. Inside
  a host: the same over the collectives of one host, the median over the hosts.
* **Healthy.** EXPECTED_GB_PER_S is what a healthy link between hosts of a GPU cluster
  gives at least: 25 GB/s of bus bandwidth per GPU, InfiniBand HDR's 200 Gb/s (NDR's
  400 Gb/s gives 40-50 GB/s; NVLink inside a host, hundreds). A link's healthy bandwidth
  is the larger of that and the median of the run's other links between hosts, but no
  more than its bandwidth inside a host. A link is **slow** when it runs at less than
  WELL_BELOW times its healthy bandwidth: well below both the run's own inside a host and
  the expectation (and the other links, where there are).
* **Its saving.** The run replayed with the transfers of the collectives across the link
  at the healthy bandwidth (each collective's transfer time times its bus bandwidth over
  the healthy one, where that is below 1; a collective without bytes by the link's): the
  replay's step time less that, per step. A collective across several links is bounded by
  its slowest; bringing one to health leaves it at the next.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from nsyswrap.crossrank.lanes import Model

EXPECTED_GB_PER_S = 25.0
WELL_BELOW = 0.5
MIN_BYTES = 1 << 20
COLUMNS = [
    "host_a",
    "host_b",
    "step",
    "collectives",
    "busbw_gb_per_s",
    "inside_gb_per_s",
    "expected_gb_per_s",
    "healthy_gb_per_s",
    "slow",
    "gain_ns",
]


def crossings(colls: pd.DataFrame) -> pd.DataFrame:
    """One row per collective and pair of hosts it crosses (host_a <= host_b; a collective
    inside one host: host_a == host_b): pg, seq, host_a, host_b, transfer_ns, busbw."""
    rows = []
    for c in colls.itertuples(index=False):
        hosts = str(c.hosts).split(",")
        pairs = [(h, h) for h in hosts] if len(hosts) == 1 else []
        pairs += [(a, b) for i, a in enumerate(hosts) for b in hosts[i + 1 :]]
        rows += [(c.pg, c.seq, a, b, c.transfer_ns, c.busbw_gb_per_s, c.bytes) for a, b in pairs]
    return pd.DataFrame(
        rows, columns=["pg", "seq", "host_a", "host_b", "transfer_ns", "busbw", "bytes"]
    )


def bandwidths(cross: pd.DataFrame) -> pd.DataFrame:
    """Per pair of hosts: collectives, bus bandwidth (module doc; NaN without bytes) and
    whether it has collectives of at least MIN_BYTES (`large`)."""
    known = cross[cross["busbw"].notna() & (cross["transfer_ns"] > 0)]
    big = known[known["bytes"] >= MIN_BYTES]
    keys = ["host_a", "host_b"]
    use = pd.concat([big, known[~known.set_index(keys).index.isin(big.set_index(keys).index)]])
    moved = (use["busbw"] * use["transfer_ns"]).groupby([use["host_a"], use["host_b"]]).sum()
    time = use.groupby(keys)["transfer_ns"].sum()
    out = cross.groupby(keys).size().rename("collectives").to_frame()
    out["busbw_gb_per_s"] = (moved / time).reindex(out.index)
    out["large"] = big.groupby(keys).size().reindex(out.index).fillna(0) > 0
    return out.reset_index()


def health(pairs: pd.DataFrame) -> pd.DataFrame:
    """The pairs between hosts with the bandwidth inside a host, the expectation, their
    healthy bandwidth and whether they are slow (module doc)."""
    inside = pairs.loc[pairs["host_a"] == pairs["host_b"], "busbw_gb_per_s"].median()
    links = pairs[pairs["host_a"] != pairs["host_b"]].reset_index(drop=True)
    bw = links["busbw_gb_per_s"]
    others = [bw.drop(index=i).median() for i in links.index]
    healthy = np.fmax(EXPECTED_GB_PER_S, np.array(others, dtype=np.float64))
    links["inside_gb_per_s"] = inside
    links["expected_gb_per_s"] = EXPECTED_GB_PER_S
    links["healthy_gb_per_s"] = healthy if np.isnan(inside) else np.fmin(healthy, inside)
    links["slow"] = (bw < WELL_BELOW * links["healthy_gb_per_s"]).fillna(False) & links["large"]
    return links


def link_whatif(model: Model, colls: pd.DataFrame, step_times) -> pd.DataFrame:
    """xr_links' rows: per link between hosts and replayed step, its bandwidth figures and
    the step time saved at its healthy bandwidth; `colls`: xr_link_collectives,
    `step_times(model, times)`: the run's step times of replayed node times."""
    keys = model.collectives[["pg", "seq", "cid"]]
    colls = colls.merge(keys, on=["pg", "seq"])
    cross = crossings(colls)
    links = health(bandwidths(cross)) if len(cross) else pd.DataFrame(columns=COLUMNS)
    if links.empty:
        return pd.DataFrame(columns=COLUMNS)
    g = model.graph
    e_nodes = np.flatnonzero(model.events["kind"].to_numpy() == "E")
    e_cid = model.events["cid"].to_numpy()[e_nodes]
    d = np.repeat(g.d[:, None], len(links), axis=1)
    cid = dict(zip(zip(colls["pg"], colls["seq"]), colls["cid"]))
    for j, link in links.iterrows():
        on = cross[(cross["host_a"] == link["host_a"]) & (cross["host_b"] == link["host_b"])]
        bw = on["busbw"].fillna(link["busbw_gb_per_s"]).to_numpy(np.float64)
        factor = pd.Series(
            np.minimum(1.0, bw / link["healthy_gb_per_s"]),
            index=[cid[k] for k in zip(on["pg"], on["seq"])],
        ).fillna(1.0)
        scale = factor.reindex(e_cid).fillna(1.0).to_numpy()
        d[e_nodes, j] = np.round(d[e_nodes, j] * scale).astype(np.int64)
    base = step_times(model, g.replay(g.d[:, None]))[0]
    fixed = step_times(model, g.replay(d))
    gains = fixed.rsub(base, axis=0)
    out = links.loc[np.repeat(links.index, len(gains))].reset_index(drop=True)
    out["step"] = np.tile(gains.index.to_numpy(), len(links))
    out["gain_ns"] = gains.to_numpy().T.reshape(-1)
    return out[COLUMNS]
