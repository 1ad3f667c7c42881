"""Links between hosts (nsyswrap.crossrank.links): each pair of hosts' bus bandwidth against
the run's inside a host and the expectation, which link is slow and what a healthy one
saves (the generator's slow NIC against the same job without it), and the rules on
hand-made collectives."""

from __future__ import annotations

import pandas as pd
import pytest

from nsyswrap import open_run
from nsyswrap.crossrank.links import (
    EXPECTED_GB_PER_S,
    MIN_BYTES,
    bandwidths,
    crossings,
    health,
)
from nsyswrap.report import ReportOptions, build_report
from nsyswrap.report.figures import rows


def _colls(rows: list[tuple]) -> pd.DataFrame:
    """(pg, seq, hosts, bytes, transfer_ns, busbw) rows as xr_link_collectives."""
    return pd.DataFrame(
        rows, columns=["pg", "seq", "hosts", "bytes", "transfer_ns", "busbw_gb_per_s"]
    )


def test_a_collective_crosses_every_pair_of_its_hosts():
    cross = crossings(
        _colls([("w", 0, "a,b,c", 2**24, 1_000, 10.0), ("t", 0, "a", 2**22, 10, 90.0)])
    )
    pairs = sorted(zip(cross["host_a"], cross["host_b"]))
    assert pairs == [("a", "a"), ("a", "b"), ("a", "c"), ("b", "c")]


def test_a_pair_bandwidth_is_its_large_collectives_bytes_over_their_time():
    """Two large collectives (10 GB/s for 1 ms, 40 GB/s for 3 ms: 130 MB in 4 ms) and a
    small latency-bound one left out; a pair of small ones only keeps them."""
    colls = _colls(
        [
            ("p", 0, "a,b", 2**24, 1_000_000, 10.0),
            ("p", 1, "a,b", 2**26, 3_000_000, 40.0),
            ("p", 2, "a,b", MIN_BYTES // 2, 50_000, 1.0),
            ("q", 0, "c,d", 1024, 10_000, 0.1),
        ]
    )
    bw = bandwidths(crossings(colls)).set_index(["host_a", "host_b"])
    assert bw.loc[("a", "b"), "busbw_gb_per_s"] == pytest.approx(32.5)
    assert bw.loc[("a", "b"), "collectives"] == 3
    assert bw.loc[("c", "d"), "busbw_gb_per_s"] == pytest.approx(0.1)
    assert bw["large"].to_dict() == {("a", "b"): True, ("c", "d"): False}


def test_a_link_well_below_the_others_and_the_expectation_is_slow():
    """Inside a host 150 GB/s; links a-b and c-d at 40 GB/s, a-c at 8: a-c is slow (its
    healthy bandwidth the others' median); the others are not. With one link only, the
    expectation is its healthy bandwidth; inside a host slower than that, the inside."""
    pairs = pd.DataFrame(
        {
            "host_a": ["a", "b", "a", "c", "a"],
            "host_b": ["a", "b", "b", "d", "c"],
            "collectives": [10] * 5,
            "busbw_gb_per_s": [150.0, 150.0, 40.0, 40.0, 8.0],
            "large": [True] * 5,
        }
    )
    links = health(pairs).set_index(["host_a", "host_b"])
    assert links["slow"].to_dict() == {("a", "b"): False, ("c", "d"): False, ("a", "c"): True}
    assert links.loc[("a", "c"), "healthy_gb_per_s"] == 40.0
    one = health(pairs.iloc[[0, 4]]).iloc[0]
    assert one["healthy_gb_per_s"] == EXPECTED_GB_PER_S and one["slow"]
    pcie = pairs.iloc[[0, 4]].assign(busbw_gb_per_s=[8.0, 8.0])  # inside a host: 8 GB/s
    assert health(pcie).iloc[0]["healthy_gb_per_s"] == 8.0 and not health(pcie).iloc[0]["slow"]
    small = pairs.iloc[[0, 4]].assign(large=False)  # latency-bound collectives only
    assert not health(small).iloc[0]["slow"]


def test_the_slow_nic_is_named_with_what_a_healthy_link_saves(fault_pair):
    """The generator's fault pair `slow_nic` (TP groups of 4 inside 2 hosts, DP pairs
    across them; every transfer across the hosts 3x longer, no rank slower): the first
    finding is the link node0 - node1, saving within 5 % of what the same job without the
    slow NIC measures; that job's link is not slow."""
    pair, folder = fault_pair("slow_nic")
    found = {}
    for half in ("fault", "fixed"):
        with open_run([folder / half]) as run:
            found[half] = build_report(run, ReportOptions())
    (first, *_) = found["fault"]["diagnosis"]["findings"]
    assert first["id"] == "slow-link" and first["evidence"]["hosts"] == ["node0", "node1"]
    measured = pair["step_times"]["difference_per_step_ns"]
    assert first["cost"]["value"] == pytest.approx(measured, rel=0.05)
    assert not any(f["id"] == "slow-link" for f in found["fixed"]["diagnosis"]["findings"])
    (link,) = rows(found["fixed"], "crossrank", "links")
    assert not link["slow"] and link["busbw"]["value"] > 0.9 * EXPECTED_GB_PER_S
