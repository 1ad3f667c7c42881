"""`nsyswrap report` over sample files: planted runs written as the sampler writes them, a
killed job's file, bad files, the report's wording and tables, and a real 4-rank CPU
torchrun job under `nsyswrap launch --sample --capture-when` with a rank slow in its data
loading between two step numbers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.sample_runs import planted_samples

from nsyswrap.errors import NsysWrapError
from nsyswrap.report import answer
from nsyswrap.report.diagnosis.persistence import describe, episodes
from nsyswrap.report.render import render_text
from nsyswrap.report.samples import sample_report
from nsyswrap.sample.inputs import split_inputs
from nsyswrap.sample.read import read_samples

ROOT = Path(__file__).resolve().parents[2]
CROSSRANK_TABLES = [
    "clock_offsets",
    "clock_uncertainty",
    "stragglers",
    "rank_waits",
    "comm_split",
    "groups",
    "bandwidth",
    "alpha_beta",
]


def files(folder: Path) -> list[Path]:
    return split_inputs([folder])[1]


def table(report: dict, section: str, table_id: str) -> list[dict]:
    sec = next(s for s in report["sections"] if s["id"] == section)
    return next(t["rows"] for t in sec["tables"] if t["id"] == table_id)


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """Rank 2's data loading 5 ms slower in steps 20-29 of 60, every 2nd step sampled, on two
    hosts whose clocks are 3 ms apart."""
    folder = tmp_path_factory.mktemp("planted")
    truth = planted_samples(folder, hosts=2)
    return folder, truth, sample_report(files(folder))


def test_the_report_names_the_rank_the_phase_and_the_window(planted):
    folder, _, report = planted
    d = report["diagnosis"]
    # slow in 5 of 29 sampled steps: intermittent, the nsys reports' word (#38 item 5)
    assert d["headline"] == "INTERMITTENT: RANK 2"
    (finding,) = d["findings"]
    assert finding["evidence"]["rank"] == 2 and finding["evidence"]["phase"] == "data_loading"
    assert finding["persistence"] == "intermittent"
    assert [(w["first"], w["last"], w["before"], w["after"]) for w in finding["windows"]] == [
        (20, 28, 18, 30)
    ]
    assert finding["text"].startswith("Rank 2 is slow in some steps: it arrives last at 5 of 29")
    assert "intermittent: in sampled steps 20-28 (5 of 29 sampled steps)" in finding["text"]
    assert d["recommendations"][0].startswith("Make `data_loading` on rank 2 as fast as")
    assert [c["what"] for c in d["cannot_answer"]] == ["from samples"]
    capture = report["capture"]
    assert capture["ranks"] == [0, 2] and capture["steps"] == "20:25"
    assert capture["command"] == (
        "nsyswrap launch --ranks 0,2 --steps 20:25 -- '<your training command>'"
    )
    assert capture["when"].startswith("nsyswrap launch --ranks 0,2 --capture-when slower=")


def test_waits_are_the_planted_ones_after_aligning_two_hosts_by_the_collectives_ends(planted):
    _, truth, report = planted
    waited = {r["rank"]: r["waited"]["value"] for r in table(report, "crossrank", "rank_waits")}
    assert waited == truth.waits
    for row in table(report, "crossrank", "clock_uncertainty"):
        assert row["uncertainty"]["value"] == 0 and row["max_residual"]["value"] == 0
    offsets = {r["rank"]: r["offset"]["value"] for r in table(report, "crossrank", "clock_offsets")}
    # host 1's clocks: wall clock 2 x 3,000,123 ns ahead, its first rank's anchor 14 ns late
    assert offsets[0] == offsets[1] == 0 and offsets[2] == offsets[3] == -2 * 3_000_123 + 14


def test_the_tables_and_verdict_are_those_of_the_nsys_path(planted):
    _, _, report = planted
    crossrank = next(s for s in report["sections"] if s["id"] == "crossrank")
    assert [t["id"] for t in crossrank["tables"]] == CROSSRANK_TABLES
    row = next(r for r in table(report, "crossrank", "stragglers") if r["step"] == "all")
    assert list(row) == [
        "step",
        "rank",
        "last",
        "collectives",
        "lag",
        "gap",
        "imposed_wait",
        "share_of_wait",
        "significant",
        "jitter",
        "affected_steps",
        "slow_steps",
        "phase",
        "phase_excess",
        "phase_steps",
    ]
    assert row["slow_steps"] == "20,22,24,26,28" and row["affected_steps"] == "20,22,24,26,28"
    assert crossrank["verdict"]["label"] == "straggler: rank 2"
    samples = next(s for s in report["sections"] if s["id"] == "samples")
    assert [t["id"] for t in samples["tables"]] == ["step_times", "slow_windows"]
    assert samples["tables"][0]["title"].endswith("(host timers on ranks 0-3)")


def test_the_text_ends_with_the_capture_command_in_shell_lines_that_fit(planted):
    _, _, report = planted
    lines = render_text(report, 80)
    assert all(len(line) <= 80 for line in lines)
    at = next(i for i, line in enumerate(lines) if line.startswith("Capture it with nsys"))
    start = next(i for i in range(at, len(lines)) if lines[i].startswith("  nsyswrap launch"))
    command = []
    for line in lines[start:]:
        command.append(line.strip().rstrip("\\").strip())
        if not line.endswith("\\"):
            break
    assert " ".join(command) == report["capture"]["command"]
    assert lines[-1].endswith("'<your training command>'")  # the last line: the other command


def test_cuda_timed_steps_are_aligned_one_step_at_a_time(tmp_path):
    truth = planted_samples(tmp_path, hosts=2, timer="cuda")
    report = sample_report(files(tmp_path))
    waited = {r["rank"]: r["waited"]["value"] for r in table(report, "crossrank", "rank_waits")}
    assert waited == truth.waits
    assert report["diagnosis"]["headline"] == "INTERMITTENT: RANK 2"
    clock = table(report, "crossrank", "clock_offsets")
    assert all(
        r["source"] == "cuda events" and "one solve per sampled step" in r["method"] for r in clock
    )


def test_a_slowdown_in_most_steps_is_persistent_and_no_straggler_means_nothing_to_capture(tmp_path):
    planted_samples(tmp_path / "always", steps=20, slow=(1, 0, 20, 4_000_000))
    report = sample_report(files(tmp_path / "always"))
    (finding,) = report["diagnosis"]["findings"]
    assert finding["persistence"] == "persistent" and report["capture"]["when"] is None
    planted_samples(tmp_path / "even", steps=20, slow=None)
    even = sample_report(files(tmp_path / "even"))
    assert even["capture"] is None and not even["diagnosis"]["findings"]
    assert " ".join(render_text(even)[-2:]).endswith("than the others in the sampled steps.")


def test_persistent_or_intermittent():
    found = episodes([4, 6, 8, 20], range(0, 30, 2))
    assert found["kind"] == "intermittent" and found["affected"] == 4
    windows = [
        (w["first"], w["last"], w["steps"], w["before"], w["after"]) for w in found["windows"]
    ]
    assert windows == [(4, 8, 3, 2, 10), (20, 20, 1, 18, 22)]
    assert describe(found, "sampled steps") == (
        "intermittent: in sampled steps 4-8, 20 (4 of 15 sampled steps)"
    )
    assert episodes(range(0, 30, 2), range(0, 30, 2))["kind"] == "persistent"
    assert episodes([], [1, 2])["kind"] == "none"
    assert episodes([0, 2], [0, 2])["windows"][0]["before"] is None


# --- files cut short, bad files, restarted jobs ------------------------------------------------


def test_a_file_cut_mid_line_is_read_to_its_last_complete_record(tmp_path, cli):
    planted_samples(tmp_path, steps=40, cut_last=True)
    samples = read_samples(files(tmp_path))
    assert len(samples.steps) == 4 * 20 - 1  # rank 3's last sampled step is lost
    (said,) = samples.notes
    assert "samples.rank3.jsonl: its last line is cut short" in said and "line 20" in said
    code, out, err = cli("report", tmp_path)
    assert code == 0 and "nsyswrap: note:" in err and "cut short" in err
    assert "INTERMITTENT: RANK 2" in out


def test_a_bad_record_is_one_line_naming_the_file_and_line(tmp_path, cli):
    planted_samples(tmp_path, steps=10)
    path = tmp_path / "samples.rank1.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    lines[3] = lines[3].replace('"timer": "host"', '"timer": 7')
    path.write_text("".join(lines))
    code, out, err = cli("report", tmp_path)
    assert code == 1 and out == ""
    assert err.startswith(f"Error: {path}:4: the record step field 'timer' is int, expected str;")
    lines[3] = "not json\n"
    path.write_text("".join(lines))
    with pytest.raises(NsysWrapError, match=r"rank1\.jsonl:4: is not a JSON record"):
        read_samples([path])
    path.write_text(path.read_text().replace('"v": 1', '"v": 2', 1))
    with pytest.raises(NsysWrapError, match="schema version 2, this nsyswrap reads version 1"):
        read_samples([path])


def _edit_record(path: Path, number: int, edit) -> None:
    """Record `number` (1-based) of sample file `path` replaced by `edit(record)`."""
    lines = path.read_text().splitlines(keepends=True)
    lines[number - 1] = json.dumps(edit(json.loads(lines[number - 1]))) + "\n"
    path.write_text("".join(lines))


def _set(record: dict, where: str, value) -> dict:
    """`record` with field `where` (`end_ns`, or `collectives.0.end_ns`) set to `value`."""
    *path, last = where.split(".")
    target = record
    for key in path:
        target = target[int(key)] if key.isdigit() else target[key]
    target[last] = value
    return record


@pytest.mark.parametrize("depth", [2_000, 200_000])
@pytest.mark.parametrize("where", ["a step's phases", "a whole line"])
def test_a_record_nested_too_deep_is_one_line(tmp_path, cli, depth, where):
    planted_samples(tmp_path, ranks=2, steps=6)
    path = tmp_path / "samples.rank1.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    nested = "[" * depth + "]" * depth
    lines[2] = (
        lines[2].replace('"phases": [', f'"phases": [{nested}, ', 1)
        if where == "a step's phases"
        else nested + "\n"
    )
    path.write_text("".join(lines))
    code, out, err = cli("report", tmp_path)
    assert code == 1 and out == "" and "Traceback" not in err, err[-2000:]
    assert err.startswith(f"Error: {path}:3: ") and err.count("\n") == 1, err[-2000:]


@pytest.mark.parametrize(
    "record, where, value",
    [
        (3, "end_ns", 2**64),
        (3, "start_ns", -(2**63) - 1),
        (3, "collectives.0.end_ns", 10**30),
        (3, "phases.1.host_ns", 2**63),
        (1, "rank", 2**64 + 1),
        (1, "rank", 2**31),
        (1, "utc_epoch_ns", 2**70),
        (3, "end_ns", 2**63 - 1),
        (3, "start_ns", -(2**53) - 1),
        (3, "collectives.0.end_ns", 2**53 + 1),
        (3, "phases.0.host_ns", 2**62),
        (3, "utc_ns", 2**63 - 1),
        (1, "utc_epoch_ns", 2**62 + 1),
        (1, "monotonic_ns", 2**63 - 1),
    ],
    ids=[
        *("step-end", "step-start", "collective-end", "phase-host", "rank", "rank-int32"),
        *("epoch", "time-int64-max", "time-before-range", "collective-time", "host-time"),
        *("utc", "epoch-year-2116", "monotonic"),
    ],
)
def test_an_integer_beyond_its_range_is_one_line(tmp_path, cli, record, where, value):
    planted_samples(tmp_path, ranks=2, steps=6)
    path = tmp_path / "samples.rank0.jsonl"
    _edit_record(path, record, lambda r: _set(r, where, value))
    code, out, err = cli("report", tmp_path)
    assert code == 1 and out == "" and "Traceback" not in err, err
    assert err.startswith(f"Error: {path}:{record}: ") and "not an integer from" in err, err
    assert err.count("\n") == 1, err


@pytest.mark.parametrize("ranks", [2, 3])
def test_the_largest_times_in_range_give_a_report(tmp_path, cli, ranks):
    """Every time at the end of its range (a UTC zero in 2116, one rank's monotonic clock
    36 years after another's on their host, steps, phases and collectives 104 days either
    side of the segment's start): the report runs, no figure overflows."""
    planted_samples(tmp_path, ranks=ranks, steps=6)
    for rank in range(ranks):
        path = tmp_path / f"samples.rank{rank}.jsonl"
        for number in range(1, len(path.read_text().splitlines()) + 1):
            _edit_record(path, number, lambda record, r=rank: _at_the_limits(record, r))
    code, out, err = cli("report", tmp_path, "-f", "json")
    assert code == 0 and "Traceback" not in err, err[-2000:]
    assert json.loads(out)["source"] == "samples"


def _at_the_limits(record: dict, rank: int) -> dict:
    if record["kind"] == "run":
        record.update(monotonic_ns=2**60 * (rank % 2), utc_epoch_ns=2**62 - rank)
    elif record["kind"] == "step":
        record.update(start_ns=-(2**53) + rank, end_ns=2**53 - rank)
        for item in record["phases"] + record["collectives"]:
            item.update(start_ns=-(2**53), end_ns=2**53 - rank)
        record["phases"][0]["host_ns"] = 2**53
    return record


@pytest.mark.parametrize("backwards", [1, 50_000_000])
@pytest.mark.parametrize("what", ["step", "phase", "collective"])
def test_a_time_that_ends_before_it_starts_is_left_out_and_counted(tmp_path, cli, what, backwards):
    """A sampled step (phase, collective) whose end comes before its start is left out of
    every figure and counted in a note, never a negative time."""
    planted_samples(tmp_path, ranks=2, steps=10)
    path = tmp_path / "samples.rank1.jsonl"
    field = {"step": "", "phase": "phases.0.", "collective": "collectives.0."}[what]

    def reverse(record: dict) -> dict:
        target = record if not field else record[field.split(".")[0]][0]
        start = target["start_ns"]
        return _set(record, f"{field}end_ns", start - backwards)

    _edit_record(path, 3, reverse)
    samples = read_samples(files(tmp_path))
    frame = {"step": samples.steps, "phase": samples.phases, "collective": samples.collectives}
    assert (frame[what]["end_ns"] >= frame[what]["start_ns"]).all()
    (said,) = [n for n in samples.notes if "end before they start" in n]
    assert said.startswith(f"1 sampled {what}(s) end before") and "rank 1 step" in said
    code, out, err = cli("report", tmp_path, "-f", "json")
    assert code == 0 and "end before they start" in err and "Traceback" not in err
    times = table(json.loads(out), "samples", "step_times")
    assert all(
        figure["value"] is None or figure["value"] >= 0
        for row in times
        for figure in row.values()
        if isinstance(figure, dict) and figure.get("unit") in ("ns", "ms")
    )


def test_a_restarted_job_appends_a_segment_and_the_later_samples_win(tmp_path):
    planted_samples(tmp_path / "a", ranks=2, steps=10, slow=None)
    planted_samples(tmp_path / "b", ranks=2, steps=6, slow=None)
    for r in range(2):
        first = (tmp_path / "a" / f"samples.rank{r}.jsonl").read_text()
        again = (tmp_path / "b" / f"samples.rank{r}.jsonl").read_text()
        (tmp_path / f"samples.rank{r}.jsonl").write_text(first + again)
    samples = read_samples(files(tmp_path))
    assert sorted(set(samples.steps["segment"])) == [0, 1]
    assert len(samples.steps) == 2 * 5
    assert (samples.steps[samples.steps["step"] < 6]["segment"] == 1).all()
    assert "6 step(s) were sampled twice" in samples.notes[0]
    report = sample_report(files(tmp_path))
    assert len(table(report, "crossrank", "rank_waits")) == 2


def test_samples_beside_exports_add_their_section_finding_and_capture(tmp_path):
    planted_samples(tmp_path, ranks=2, steps=20, slow=(1, 4, 10, 3_000_000))
    from nsyswrap.engine.opener import DEFAULT_OPENER
    from nsyswrap.report.options import ReportOptions

    inputs = [ROOT / "fixtures" / "run2", *files(tmp_path)]
    exports, samples = split_inputs(inputs)
    assert exports == [ROOT / "fixtures" / "run2"] and len(samples) == 2
    report = answer(inputs, ReportOptions(), opener=DEFAULT_OPENER).document
    assert [s["id"] for s in report["sections"]][-1] == "samples"
    assert "stragglers" in [t["id"] for t in report["sections"][-1]["tables"]]
    assert report["diagnosis"]["findings"][-1]["scope"] == "samples"
    assert report["capture"]["ranks"] == [0, 1]


def test_the_html_page_draws_step_times_with_the_slow_window(planted, tmp_path, cli):
    folder, _, _ = planted
    page = tmp_path / "page.html"
    code, _, err = cli("report", folder, "--html", page)
    assert code == 0 and f"wrote {page}" in err
    html = page.read_text()
    assert html.count("<polyline") == 4 and "slow in sampled steps 20–28" in html
    assert "nsyswrap launch --ranks 0,2 --steps 20:25" in html


# --- a real run ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sampled_run(tmp_path_factory):
    """4 CPU ranks (gloo) under `nsyswrap launch --sample --capture-when` with zero-code steps;
    rank 2's data loading 80 ms slower in steps 12-21; ranks 0 and 2 under a stand-in nsys."""
    pytest.importorskip("torch", reason="the run needs torch")
    pytest.importorskip("nvtx", reason="the run needs the nvtx package")
    from helpers.nsys_standin import Standin

    folder = tmp_path_factory.mktemp("sampled")
    fake = Standin(folder)
    env = {
        **os.environ,
        "NSYS_STANDIN_LOG": str(fake.log),
        "PATH": os.pathsep.join(
            [str(fake.bin), str(Path(sys.executable).parent), os.environ["PATH"]]
        ),
    }
    out = folder / "run"
    command = [
        "torchrun",
        "--nproc-per-node",
        "4",
        str(ROOT / "examples" / "train_ddp.py"),
        "--steps",
        "30",
        "--slow",
        "2:12:22:80",
    ]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "nsyswrap",
            "launch",
            "--sample-every",
            "2",
            "--capture-when",
            "slower=2.5,steps=3,after=4",
            "--ranks",
            "0,2",
            "--out",
            str(out),
            "--",
            *command,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return out, fake, command


@pytest.mark.torch
def test_a_4_rank_torchrun_job_with_a_rank_slow_in_data_loading(sampled_run, cli):
    out, _, command = sampled_run
    # the sample files alone: the stand-in nsys wrote placeholder reports beside them
    code, text, err = cli("report", out / "samples.rank*.jsonl", "--format", "json")
    assert code == 0, err
    report = json.loads(text)
    finding = report["diagnosis"]["findings"][0]
    assert report["diagnosis"]["headline"] == "INTERMITTENT: RANK 2"  # slow in steps 12-21 of 30
    assert finding["evidence"]["phase"] == "before_forward"
    slow = [s for w in finding["windows"] for s in range(w["first"], w["last"] + 1, 2)]
    assert set(slow) >= {14, 16, 18} and set(slow) <= set(range(12, 22))
    capture = report["capture"]
    first = finding["windows"][0]["first"]
    ranks = ",".join(map(str, capture["ranks"]))
    assert capture["command"].startswith(
        f"nsyswrap launch --ranks {ranks} --steps "
        f"{first}:{first + 5} --annotate steps,sample "
        f"--out {out}-capture -- torchrun --nproc-per-node 4"
    )
    assert 2 in capture["ranks"] and capture["command"].endswith(" ".join(command[4:]))


@pytest.mark.torch
def test_the_capture_rule_opened_a_window_on_the_ranks_under_nsys(sampled_run):
    out, fake, _ = sampled_run
    profiled = fake.calls()
    assert sorted(
        next(a for a in c if a.startswith("--output=")).split(".rank")[-1] for c in profiled
    ) == ["0", "2"]
    for call in profiled:
        assert {
            "--capture-range=nvtx",
            "--nvtx-capture=capture@nsyswrap",
            "--capture-range-end=stop",
        } <= set(call)
    trigger = json.loads((out / "capture.1.json").read_text())
    assert trigger["stop"] - trigger["start"] == 3
    assert trigger["step_ns"] > 2.5 * trigger["median_ns"]
    said = [json.loads(line) for line in (out / f"samples.rank{trigger['fired_by']}.jsonl").open()]
    assert [r for r in said if r["kind"] == "capture"] == [{"v": 1, "kind": "capture", **trigger}]
    assert json.loads((out / "manifest.json").read_text())["captures"] == ["capture.1.json"]


@pytest.mark.torch
def test_sampling_alone_runs_no_nsys_and_the_manifest_lists_the_samples(sampled_run):
    out, fake, _ = sampled_run
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["samples"] == [f"samples.rank{r}.jsonl" for r in range(4)]
    assert [r["profiled"] for r in manifest["ranks"]] == [True, False, True, False]
