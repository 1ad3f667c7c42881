"""Text output for people: the answer first, and readable at 80 columns (no line wider than
the terminal, no number split, long tables as statistics with the rows a flag away)."""

from __future__ import annotations

import json
import re

import pytest
from helpers.paths import FIXTURES

from nsyswrap import open_run
from nsyswrap.report import ReportOptions, build_report
from nsyswrap.report.render import render_text
from nsyswrap.text_table import fit, shorten_column, wrap

RUN4 = FIXTURES / "run4_straggler"


@pytest.fixture(scope="module")
def run4() -> dict:
    with open_run([RUN4]) as run:
        return build_report(run, ReportOptions())


def _table(report: dict, section: str, table: str) -> list[dict]:
    sec = next(s for s in report["sections"] if s["id"] == section)
    return next(t["rows"] for t in sec["tables"] if t["id"] == table)


def test_first_ten_lines_name_the_straggler_its_phase_and_its_cost(run4):
    top = "\n".join(render_text(run4, 80)[:10])
    assert "DIAGNOSIS: STRAGGLER: RANK 2" in top
    assert "Rank 2 is the straggler" in top and "`data_loading`" in top
    assert re.search(r"would save \d+\.\d\d ms per\s+step", top)  # the gain, first
    assert re.search(r"Ranks 0, 1 and 3 wait \d+\.\d\d ms per\s+step\s+each\s+for\s+it", top)


def test_first_screen_is_the_diagnosis_and_key_figures(run4):
    lines = render_text(run4, 80)
    table_end = next(i for i, line in enumerate(lines) if line.startswith("Longest steps"))
    assert table_end < 25
    screen = "\n".join(lines[:table_end])
    for rank, label in ((0, "waiting-for-peers"), (2, "host-bound")):
        assert re.search(rf"^ +{rank}  {label} ", screen, re.M)
    assert "communication-bound" not in "\n".join(lines)


@pytest.mark.parametrize("width", [80, 140])
@pytest.mark.parametrize("detail", [False, True])
def test_no_line_is_wider_than_the_terminal(run4, width, detail):
    lines = render_text(run4, width, detail=detail)
    assert max(map(len, lines)) <= width


def test_every_ledger_figure_appears_unbroken_at_80_columns(run4):
    text = "\n".join(render_text(run4, 80))
    for row in _table(run4, "single_rank", "ledger"):
        for column, cell in row.items():
            if isinstance(cell, dict):
                assert f"{cell['value'] / 1e6:,.3f}" in text, column


def test_long_tables_become_statistics_with_the_rows_a_flag_away(run4):
    text = " ".join(" ".join(render_text(run4, 80)).split())
    assert "statistics of duration per step" in text and "--section steps" in text
    steps = render_text(run4, 80, section="steps")
    assert len([line for line in steps if re.match(r"^\d+ +\d+ +\d+ ", line)]) == 40
    detail = "\n".join(render_text(run4, 80, detail=True))
    assert "statistics of duration" not in detail


def test_a_table_named_as_its_section_is_section_slash_table(run4):
    section = render_text(run4, 80, section="data_quality")
    table = render_text(run4, 80, section="data_quality/data_quality")
    assert section[0].startswith("── Data quality") and table[0].startswith("Data quality:")
    assert set(table) <= set(section)


def test_unknown_section_names_the_choices(cli):
    code, _, err = cli("report", RUN4, "--section", "nope")
    assert code == 1 and "choose one of" in err and "stragglers" in err


@pytest.mark.parametrize("name", ["nope", "Steps", "step", "", "diagnosis;rm"])
@pytest.mark.parametrize("inputs", [[RUN4], [RUN4 / "rank0.sqlite", "-f", "json"]])
def test_an_unknown_section_is_refused_before_any_work(cli, cache, monkeypatch, name, inputs):
    """Refused before a report is opened (nothing read, nothing cached)."""
    import nsyswrap.engine.opener

    def never(*_):
        raise AssertionError("a report was opened")

    monkeypatch.setattr(nsyswrap.engine.opener.Opener, "open", never)
    code, out, err = cli("report", *inputs, "--section", name)
    assert code == 1 and out == "" and f"--section {name}: is no section or table" in err
    assert "choose one of" in err and "stragglers" in err and not cache.exists()


def test_every_section_and_table_a_report_has_is_known(run4, tmp_path):
    """check_section's lists (SECTIONS, TABLES) hold every id of run4's report, of
    edge_cases' and of a report of sample files."""
    from helpers.sample_runs import planted_samples

    from nsyswrap.report import report
    from nsyswrap.report.render import SECTIONS, TABLES
    from nsyswrap.report.samples import sample_report

    planted_samples(tmp_path, ranks=2, steps=10)
    reports = [run4, report([FIXTURES / "edge_cases"]), sample_report([*tmp_path.glob("*.jsonl")])]
    for built in reports:
        for sec in built["sections"]:
            assert sec["id"] in SECTIONS
            assert {t["id"] for t in sec["tables"]} <= set(TABLES), sec["id"]


def test_fit_drops_columns_and_never_cuts_numbers():
    headers = ["rank", "name", "compute_only_ns", "idle_ns", "comm_only_ns"]
    rows = [["0", "a" * 50, "21,594,123", "2,001,000", "3,994,000"]]
    lines, dropped = fit(headers, rows, [True, False, True, True, True], 40)
    assert max(map(len, lines)) <= 40
    assert dropped and "21,594,123" in "\n".join(lines)
    assert "compute_" in lines[0] and "only_ns" in lines[1]  # the header folds, cells do not
    assert "…" in lines[-1]  # long text is shortened, not wrapped


def test_a_table_keeps_the_columns_it_does_not_declare_droppable():
    headers = ["step", "rank", "lag", "jitter", "extra", "phase"]
    rows = [["1", "2", "0.958", "0.021", "x" * 30, "data_loading"]]
    right = [False, False, True, True, False, True]
    lines, dropped = fit(headers, rows, right, 36)  # undeclared: from the right
    assert "phase" in dropped
    lines, dropped = fit(headers, rows, right, 36, droppable=(4, 3))
    assert dropped == ["jitter", "extra"] and "data_loading" in lines[-1]


def test_names_are_shortened_in_the_middle_and_stay_told_apart():
    names = [
        "nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopB_TNT",
        "nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_TNT",
        "elementwise_kernel",
    ]
    short = shorten_column(names, 12)
    assert len(set(short)) == 3 and all(len(s) <= 12 for s in short)
    assert short[0].startswith("nvjet") and short[0].endswith("TNT") and "…" in short[0]


def test_wrap_keeps_numbers_with_their_units():
    lines = wrap("x " * 30 + "waits 0.99 ms per step", 64)
    assert all(not line.endswith("0.99") for line in lines)


def test_query_tables_fit_80_columns(cli):
    code, out, _ = cli("query", "ledger.devices", FIXTURES / "run2")
    lines = out.splitlines()
    assert code == 0 and max(map(len, lines)) <= 80
    assert re.match(r"^ +0 +0 ", lines[3]) and re.match(r"^ +1 +1 ", lines[4])
    assert "--format csv" in out


def test_json_report_has_the_diagnosis(cli):
    code, out, _ = cli("report", RUN4, "-f", "json")
    report = json.loads(out)
    assert code == 0 and list(report["diagnosis"]) == [
        "headline",
        "findings",
        "noise_floor",
        "window",
        "devices",
        "host_steps",
        "worst_steps",
        "recommendations",
        "cannot_answer",
    ]


def test_terminal_and_html_write_a_cell_alike():
    """One cell formatter (nsyswrap.report.figures.cell_text) for the terminal and the page."""
    from nsyswrap.html_report.page import table_html
    from nsyswrap.report.render import _table

    spec = {
        "id": "t",
        "title": "T",
        "rows": [
            {
                "rank": 0,
                "time": {"value": 12345, "unit": "ns"},
                "share": {"value": 0.25, "unit": "fraction"},
                "shared": True,
                "gone": {"value": None, "unit": "ns", "reason": "why"},
            },
            {
                "rank": 1,
                "time": {"value": 2500, "unit": "ns"},
                "share": {"value": 0.5, "unit": "fraction"},
                "shared": False,
                "gone": {"value": None, "unit": "ns", "reason": "why"},
            },
        ],
    }
    terminal = "\n".join(_table(spec, 80, False))
    page = table_html(spec)
    for text in ("12.345", "2.500", "25.0", "50.0", "yes", "no", "n/a"):
        assert re.search(rf"(^|\s){re.escape(text)}(\s|$)", terminal, re.M), text
        assert f">{text}</td>" in page, text
    assert "(times in us)" in terminal and "time (µs)" in page
