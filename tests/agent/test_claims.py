"""`nsyswrap check-claims`: every number with a unit, rank, step and phase of the README's
first screen of fixtures/run4_straggler is held by the report's tables; an altered one is
not (exit 3); and what docs/mcp.md says it can and cannot verify."""

from __future__ import annotations

import json
import re

import pytest
from helpers.paths import FIXTURES, ROOT

from nsyswrap.agent.claims import check
from nsyswrap.report import report

RUN = FIXTURES / "run4_straggler"


def _first_screen() -> str:
    """The README's first screen of `nsyswrap report fixtures/run4_straggler`."""
    readme = (ROOT / "README.md").read_text()
    found = re.search(
        r"```text\n\$ nsyswrap report fixtures/run4_straggler\n(.*?)```", readme, re.S
    )
    assert found, "the README shows the first screen of fixtures/run4_straggler"
    return found.group(1)


@pytest.fixture(scope="module")
def run4():
    return report([RUN])


def _claims(run4, text: str) -> list[dict]:
    return check(run4, text)["claims"]


def test_every_number_of_the_first_screen_is_held(cli, tmp_path):
    screen = tmp_path / "screen.txt"
    screen.write_text(_first_screen())
    code, out, _ = cli("check-claims", RUN, screen, "-f", "json")
    claims = json.loads(out)["claims"]
    assert code == 0 and all(c["held"] for c in claims), [c for c in claims if not c["held"]]
    numbers = [c for c in claims if c["kind"] == "number"]
    written = re.findall(r"\d+\.\d+ ms|\d+ ?%", _first_screen())
    assert len(numbers) >= len(written) + 4 * 8  # and 8 figures per rank in its table
    assert {c["kind"] for c in claims} == {"number", "rank", "step", "phase"}
    held = next(c for c in numbers if c["claim"] == "0.37 ms")
    assert held["table"] and held["row"] is not None and held["column"]


def test_the_live_first_screen_is_held(cli, tmp_path):
    code, out, _ = cli("report", RUN)
    screen = tmp_path / "screen.txt"
    screen.write_text(out.split("\n── ")[0])
    code, out, _ = cli("check-claims", RUN, screen)
    assert code == 0 and " 0 not held" in out


@pytest.mark.parametrize(
    "true, altered, why",
    [
        ("would save 0.37 ms per", "would save 0.47 ms per", "no figure within ±0.005 ms"),
        ("(17 %", "(19 %", "no figure within ±0.5 %"),
        ("at 19 of 19", "at 18 of 19", "no row counts 18 of 19"),
        ("0.95 ms per step after", "0.85 ms per step after", "of 0.85 ms per step"),
        ("28% of", "38% of", "in a row of rank 2"),
        ("  2.18  2.29  2.32", "  2.28  2.29  2.32", "of mean ms: 2.28 in a row of rank 0"),
        ("rank 3 step 8 2.37 ms", "rank 3 step 8 2.47 ms", "in a row of rank 3, step 8"),
    ],
)
def test_an_altered_number_is_not_held(cli, tmp_path, true, altered, why):
    not_held = _not_held(cli, tmp_path, true, altered)
    assert len(not_held) == 1 and why in not_held[0]["why"], not_held


@pytest.mark.parametrize(
    "true, altered, why",
    [
        ("STRAGGLER: RANK 2", "STRAGGLER: RANK 7", "no table has rank 7"),
        ("steps 0-9", "steps 0-12", "no table has step 10, 11, 12"),
        ("fixing `data_loading`", "fixing `data_load`", "no table names `data_load`"),
    ],
)
def test_an_altered_rank_step_or_phase_is_not_held(cli, tmp_path, true, altered, why):
    """(and the numbers said of a phase the run does not have are not held either)"""
    not_held = _not_held(cli, tmp_path, true, altered)
    assert why in not_held[0]["why"], not_held
    assert all(c["kind"] == "number" and "data_load" in c["why"] for c in not_held[1:])


def _not_held(cli, tmp_path, true: str, altered: str) -> list[dict]:
    """The claims not held of the first screen with `true` written `altered` (exit 3)."""
    screen = _first_screen()
    assert screen.count(true) == 1
    text = tmp_path / "altered.txt"
    text.write_text(screen.replace(true, altered))
    code, out, _ = cli("check-claims", RUN, text, "-f", "json")
    assert code == 3
    return [c for c in json.loads(out)["claims"] if not c["held"]]


@pytest.mark.parametrize(
    "text, held",
    [
        # rounding: within half the last digit printed
        ("Rank 0 computes 63% of the time.", True),
        ("Rank 0 computes 62.6% of the time.", True),
        ("Rank 0 computes 62.4% of the time.", False),
        # per step and over the run: a total is not a per-step figure
        ("Rank 0 waits 10.29 ms in collectives over the run.", True),
        ("Rank 0 waits 10.29 ms per step in collectives.", False),
        # without a sign, the size of a lag; with one, its sign
        ("Rank 0 arrives 0.02 ms before the median rank.", True),
        ("Rank 0 arrives -0.02 ms after the median rank.", True),
        ("Rank 0 arrives +0.02 ms after the median rank.", False),
        # the text's own arithmetic: a sum no table holds
        ("Ranks 0, 1 and 3 wait 30.48 ms in all for rank 2.", False),
        # units: sizes decimal or binary, bandwidth, ratios
        ("Each all_reduce moves 26.2 MB (25 MiB) at 420.9 GB/s bus bandwidth.", True),
        ("Idealising every rank makes the step 1.27x faster.", True),
        # a step's figure needs that step named, and it must be that step's
        # (the path charges a phase's host and GPU sides apart since #36's replay: data_loading's
        # 0.77 ms of step 0 is 0.60 ms on the host and 0.17 ms on the GPU; their sum is the
        # text's arithmetic)
        ("On the critical path of step 0, `data_loading` on rank 2 takes 0.60 ms.", True),
        ("On the critical path of step 0, `data_loading` on rank 2 takes 0.70 ms.", False),
        ("Rank 2's data loading takes 0.60 ms on the critical path.", False),
        # a Markdown table: each cell in its column's unit, in its row's rank
        ("| rank | mean ms | idle % |\n|---|---|---|\n| 0 | 2.18 | 10 |\n| 2 | 2.18 | 29 |", True),
        ("| rank | mean ms | idle % |\n|---|---|---|\n| 2 | 2.18 | 19 |", False),
    ],
)
def test_what_is_verified(run4, text, held):
    claims = _claims(run4, text)
    numbers = [c for c in claims if c["kind"] == "number"]
    assert numbers and all(c["held"] for c in claims if c["kind"] != "number")
    assert all(c["held"] for c in numbers) == held, numbers


def test_ranks_steps_and_phases_a_run_does_not_have(run4):
    claims = _claims(run4, "The run has 4 ranks; rank 5, step 12 and `nope` are not in it.")
    assert [(c["claim"], c["held"]) for c in claims] == [
        ("4 ranks", True),
        ("rank 5", False),
        ("step 12", False),
        ("`nope`", False),
    ]


def test_a_text_without_claims_and_bad_input(cli, tmp_path, monkeypatch):
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO("Nothing to check here.\n"))
    code, out, _ = cli("check-claims", RUN, "-")
    assert code == 0 and out.strip() == "0 claims: 0 held, 0 not held"
    code, out, err = cli("check-claims", RUN, tmp_path / "none.txt")
    assert code == 1 and not out and err.startswith("Error: ") and "does not exist" in err
    binary = tmp_path / "answer.txt"
    binary.write_bytes(b"\xff\xfe rank 2")
    code, _, err = cli("check-claims", RUN, binary)
    assert code == 1 and "is not UTF-8 text" in err
    text = tmp_path / "answer.md"
    text.write_text("Rank 2 would save 0.37 ms per step.")
    code, out, _ = cli("check-claims", RUN, text, "-f", "csv")
    assert code == 0 and out.splitlines()[0] == "line,claim,kind,held,held_by,why"


@pytest.mark.parametrize("capture", ["h200_fix_slow", "h200_ddp_gloo_slow_zero_code"])
def test_the_findings_of_real_captures_are_held(capture):
    """Each finding of the diagnosis of a real capture, as the first screen says it."""
    found = report([FIXTURES / "real" / capture])
    for finding in found["diagnosis"]["findings"]:
        claims = check(found, finding["text"])["claims"]
        assert claims and all(c["held"] for c in claims), [c for c in claims if not c["held"]]


@pytest.mark.parametrize("fmt", ["json", "csv"])
@pytest.mark.parametrize("form", ["itself", "dot-dot", "symlink", "hard-link", "glob-run"])
def test_the_text_checked_is_never_the_output(cli, tmp_path, form, fmt):
    """`check-claims RUN TEXT -o TEXT --force` wrote its answer over the text it checked:
    refused, however the output names it (or a name the RUN glob reads), --force or not."""
    import os
    import shutil

    text = tmp_path / "answer.txt"
    text.write_text("Rank 2 is the straggler: 1.5 ms per step.\n")
    run = RUN
    out = {
        "itself": lambda: text,
        "dot-dot": lambda: tmp_path / ".." / tmp_path.name / "answer.txt",
        "symlink": lambda: (tmp_path / "link.txt").symlink_to(text) or tmp_path / "link.txt",
        "hard-link": lambda: os.link(text, tmp_path / "hard.txt") or tmp_path / "hard.txt",
        "glob-run": lambda: tmp_path / "run" / "rank9.json",
    }[form]()
    if form == "glob-run":
        run = f"{shutil.copytree(RUN, tmp_path / 'run')}/rank*"
    for force in ([], ["--force"]):
        code, out_text, err = cli("check-claims", run, text, "-f", fmt, "-o", out, *force)
        assert code == 1 and out_text == "" and "Traceback" not in err, err
        assert err.startswith(f"Error: {out}: ") and "an input is never overwritten" in err, err
    assert text.read_text() == "Rank 2 is the straggler: 1.5 ms per step.\n"
