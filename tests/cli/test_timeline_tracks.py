"""What `nsyswrap timeline` writes is what Perfetto shows well (checked against the Chrome
trace-event format: no Perfetto trace processor installs from a package registry, its
Python package downloads the binary at run time): args on every slice, slices that nest on
each track, named threads and streams, CUDA API calls, flows from each launch to its GPU
work and from a collective's last arrival to the other members, a per-rank archive with a
Perfetto manifest carrying the fitted clock offsets, and (--ideal) each rank's steps as the
replay times them with that rank idealised."""

from __future__ import annotations

import json
import tarfile
from collections import Counter, defaultdict

import pytest
from helpers.crossrank_runs import planted_run
from helpers.paths import FIXTURES

from nsyswrap import open_run, query
from nsyswrap.timeline import chrome_trace
from nsyswrap.timeline.lanes import nested_lanes

REAL = FIXTURES / "real" / "h200_fix_slow"  # DDP over gloo: autograd thread, bucket overlap


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    out = tmp_path_factory.mktemp("tracks")
    planted_run(out, ranks=3, steps=4)
    with open_run([out]) as run:
        return out, chrome_trace(run, ideal=True)


@pytest.fixture(scope="module")
def real():
    with open_run([REAL]) as run:
        return chrome_trace(run, ideal=True)


def _ns(us: float) -> int:
    return round(us * 1_000)


def _tracks(trace: dict) -> dict[tuple[int, int], list[tuple[int, int, dict]]]:
    tracks = defaultdict(list)
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            start = _ns(e["ts"])
            tracks[(e["pid"], e["tid"])].append((start, start + _ns(e["dur"]), e))
    return tracks


def _improperly_nested(spans: list[tuple[int, int, dict]]) -> int:
    """Slices that overlap an open slice of their track without lying inside it."""
    bad, open_ends = 0, []
    for start, end, _ in sorted(spans, key=lambda s: (s[0], s[0] - s[1])):
        while open_ends and open_ends[-1] <= start:
            open_ends.pop()
        bad += bool(open_ends and end > open_ends[-1])
        open_ends.append(end)
    return bad


def _names(trace: dict, what: str) -> dict[tuple, str]:
    return {
        (e["pid"], e.get("tid")): e["args"]["name"]
        for e in trace["traceEvents"]
        if e["ph"] == "M" and e["name"] == what
    }


def _flows(trace: dict, name: str) -> list[tuple[dict, dict]]:
    ends = defaultdict(dict)
    for e in trace["traceEvents"]:
        if e["ph"] in "sf" and e["name"] == name:
            assert e["ph"] not in ends[e["id"]], "one start and one finish per flow"
            ends[e["id"]][e["ph"]] = e
    assert all(set(pair) == {"s", "f"} for pair in ends.values())
    return [(pair["s"], pair["f"]) for _, pair in sorted(ends.items())]


def _slice_at(tracks, event: dict) -> dict:
    """The innermost slice of the flow event's track open at its instant."""
    at = _ns(event["ts"])
    held = [s for s in tracks[(event["pid"], event["tid"])] if s[0] <= at <= s[1]]
    assert held, f"flow {event} binds to no slice"
    return min(held, key=lambda s: s[1] - s[0])[2]


def test_lanes_put_only_crossing_slices_apart():
    spans = [(0, 10), (0, 4), (2, 3), (5, 12), (6, 8), (10, 11), (12, 12)]
    assert nested_lanes(spans) == [0, 0, 0, 1, 0, 0, 0]


@pytest.mark.parametrize("which", ["planted", "real"])
def test_every_slice_has_args_and_nests_on_a_named_track(which, request):
    trace = request.getfixturevalue(which)
    trace = trace[1] if which == "planted" else trace
    tracks = _tracks(trace)
    named = _names(trace, "thread_name")
    assert set(tracks) <= set(named)
    assert all(e["args"] and e["args"]["kind"] == e["cat"] for s in tracks.values() for *_, e in s)
    assert {k: _improperly_nested(v) for k, v in tracks.items() if _improperly_nested(v)} == {}
    other = trace["otherData"]
    assert sum(len(v) for v in tracks.values()) == other["events"] + other["ideal_steps"]


def test_each_rank_has_an_ideal_track_from_the_replay_above_its_recorded_steps(planted):
    """Per rank, its first track: the window's steps as the replay times them with that
    rank idealised, end to end from the step time's origin; their savings are the
    replay's (crossrank.whatif, kind rank); the planted straggler (rank 2) saves time."""
    out, trace = planted
    tracks, named = _tracks(trace), _names(trace, "thread_name")
    whatif = query("crossrank.whatif", [out])
    gain = whatif[whatif["kind"] == "rank"].set_index("rank")["gain_ns_per_step"]
    steps = query("crossrank.step_times", [out])
    origin = query("crossrank.step_phases", [out]).query("step == 0 and phase.isna()")
    for rank in range(3):
        assert named[(rank, 1)] == "ideal (replay)"
        ideal = [e for *_, e in sorted(tracks[(rank, 1)], key=lambda s: s[0])]
        assert (
            [e["name"] for e in ideal]
            == [f"step {s}" for s in steps["step"]]
            == [f"step {s}" for s in range(4)]
        )
        assert {e["cat"] for e in ideal} == {"ideal"}
        assert _ns(ideal[0]["ts"]) == origin["start_ns"].max()
        for before, after in zip(ideal, ideal[1:]):
            assert abs(_ns(before["ts"] + before["dur"]) - _ns(after["ts"])) <= 1
        args = [e["args"] for e in ideal]
        assert [a["recorded_ns"] for a in args] == steps["recorded_ns"].tolist()
        assert all(a["saved_ns"] == a["replayed_ns"] - a["ideal_ns"] for a in args)
        assert all(abs(_ns(e["dur"]) - e["args"]["ideal_ns"]) <= 1 for e in ideal)
        saved = sum(a["saved_ns"] for a in args) / len(args)
        assert saved == pytest.approx(gain.get(rank, 0), abs=1)
    assert gain.idxmax() == 2 and gain[2] > 100_000


def test_real_threads_keep_their_names_and_overlaps_get_lanes(real):
    names = set(_names(real, "thread_name").values())
    assert any(n.startswith("pt_autograd_0 ") for n in names)  # the autograd thread's `bwd:`
    assert any(n.endswith(" CUDA API") for n in names)
    assert "collectives #2" in names  # DDP's buckets are outstanding together
    cats = Counter(e["cat"] for e in real["traceEvents"] if e["ph"] == "X")
    assert cats["cuda_api"] > 0 and cats["collective"] > 0 and cats["compute"] > 0


def test_kernel_and_collective_slices_carry_their_args(planted):
    _, trace = planted
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    kernel = next(e for e in slices if e["cat"] == "nccl")
    assert {"device", "stream", "correlation_id"} <= set(kernel["args"])
    coll = next(e for e in slices if e["cat"] == "collective")
    assert {"op", "pg", "seq", "last_rank", "wait_ns"} <= set(coll["args"])
    rng = next(e for e in slices if e["cat"] == "nvtx" and e["name"].startswith("coll:"))
    assert {"op", "bytes", "pg", "seq"} <= set(rng["args"])


def test_each_launch_flows_to_the_gpu_work_it_launched(real):
    tracks = _tracks(real)
    flows = _flows(real, "launch")
    for start, finish in flows:
        call, work = _slice_at(tracks, start), _slice_at(tracks, finish)
        assert call["cat"] == "cuda_api" and work["cat"] not in ("cuda_api", "nvtx")
        assert call["args"]["correlation_id"] == work["args"]["correlation_id"]
        assert start["pid"] == finish["pid"]
    with open_run([REAL]) as run:
        launched = run.df(
            "SELECT count(*) AS n FROM kernels AS k JOIN api_calls AS a "
            "ON a.rank = k.rank AND a.pid = k.pid AND a.correlation_id = k.correlation_id"
        )["n"][0]
    assert len(flows) == launched


def test_collective_flows_leave_the_last_arrival_for_every_other_member(planted):
    _, trace = planted
    tracks = _tracks(trace)
    flows = _flows(trace, "collective")
    for start, finish in flows:
        source, target = _slice_at(tracks, start), _slice_at(tracks, finish)
        assert source["cat"] == "collective" and source["pid"] == source["args"]["last_rank"]
        assert target["args"]["seq"] == source["args"]["seq"]
        assert target["pid"] != source["pid"]
    per_collective = Counter(
        (e["args"]["pg"], e["args"]["seq"])
        for e in trace["traceEvents"]
        if e["ph"] == "X" and e["cat"] == "collective"
    )
    assert len(flows) == sum(n - 1 for n in per_collective.values())


def test_per_rank_archive_lines_up_by_the_fitted_offsets(planted, cli, tmp_path):
    out, merged = planted
    target = tmp_path / "run.tar"
    code, stdout, err = cli("timeline", out, "-o", target, "--per-rank", "--ideal")
    assert code == 0 and f"wrote {target}" in stdout, err
    with tarfile.open(target) as tar:
        files = {m.name: json.load(tar.extractfile(m)) for m in tar.getmembers()}
    manifest = files.pop("perfetto_manifest.json")["perfetto_manifest"]
    assert manifest["version"] == 1
    assert (
        {f["path"] for f in manifest["files"]} == set(files) == {f"rank{r}.json" for r in range(3)}
    )
    clocks = query("crossrank.clock_offsets", [out]).set_index("rank")["shift_ns"]
    reference = clocks.idxmin()
    for entry in manifest["files"]:
        rank = int(entry["path"][4:-5])
        if rank == reference:
            assert "clocks" not in entry
            continue
        assert entry["clocks"]["sync_to"] == {"file": f"rank{reference}.json"}
        assert entry["clocks"]["offset_ns"] == clocks[rank] - clocks[reference] >= 0
    # each file, moved by its shift, holds that rank's slices of the merged trace
    for name, trace in files.items():
        rank = int(name[4:-5])
        own = sorted(
            (_ns(e["ts"]) + int(clocks[rank]), e["name"])
            for e in trace["traceEvents"]
            if e["ph"] == "X"
        )
        expected = sorted(
            (_ns(e["ts"]), e["name"])
            for e in merged["traceEvents"]
            if e["ph"] == "X" and e["pid"] == rank
        )
        assert [(abs(a - b) <= 1, n == m) for (a, n), (b, m) in zip(own, expected)] == [
            (True, True)
        ] * len(expected)
        assert len(own) == len(expected)
