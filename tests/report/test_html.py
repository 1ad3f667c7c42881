"""`nsyswrap report RUN --html PATH`: a self-contained page with the plots and every section."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from helpers.crossrank_runs import planted_run

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """(run dir, page path, page text) of `nsyswrap report RUN --html` on a 4-rank run."""
    from nsyswrap.cli import main

    out = tmp_path_factory.mktemp("html_run")
    planted_run(out, ranks=4, steps=3, straggler=(3, "data_loading", 200_000))
    html = out / "report.html"
    with pytest.raises(SystemExit) as done:
        main(
            ["report", str(out), "--html", str(html), "-f", "json", "-o", str(out / "report.json")]
        )
    assert done.value.code in (0, None)
    return out, html, html.read_text(encoding="utf-8")


def test_page_is_self_contained(page):
    _, _, text = page
    assert text.startswith("<!DOCTYPE html>")
    assert not re.search(r"<script|<link|<img|<iframe|url\(|@import", text)
    assert set(re.findall(r"https?://[^\s\"'<>]+", text)) <= {"http://www.w3.org/2000/svg"}


def test_page_has_the_four_plots_and_the_sections(page):
    _, _, text = page
    for label in (
        "per-rank step timeline",
        "GPU time ledger per rank",
        "critical path per step",
        "arrival skew per rank and collective",
    ):
        assert f'aria-label="{label}"' in text
    assert text.count("<svg") == 4
    # the straggler's data loading on each step's critical path
    assert len(re.findall(r"<title>step \d+: rank 3 data_loading", text)) == 3
    assert "straggler: rank 3" in text and "`data_loading`" in text
    assert "Where the GPU time goes" in text and "Across ranks" in text
    assert (
        len(re.findall(r"<title>rank \d+, pg=0 seq=\d+: arrived", text)) == 4 * 6
    )  # one cell per rank x collective


def test_the_diagnosis_comes_before_the_plots(page):
    _, _, text = page
    assert text.index('class="diagnosis"') < text.index("<h2>Plots</h2>")
    assert "Diagnosis: STRAGGLER: RANK 3" in text and "What to do" in text


def test_plots_that_cannot_be_drawn_say_how_to_capture_them(tmp_path):
    from helpers.report_builder import make_report

    from nsyswrap import open_run
    from nsyswrap.html_report import html_page
    from nsyswrap.report import ReportOptions
    from nsyswrap.report.flow import build

    path = make_report(tmp_path / "rank0.sqlite", kernels=[(0, 100, 0, 7, "a")])
    with open_run([path]) as run:
        found = build(run, ReportOptions(), with_plots=True)
        text = html_page(found.document, found.plots)
    assert "Not drawn: these reports have no `step:&lt;i&gt;` ranges; mark steps" in text
    assert "--annotate collectives" in text


PHASE_TIP = re.compile(
    r'fill="([^"]+)" ><title>(?:rank \d+ step \d+ ([\w ]+): |step -?\d+: rank \d+ ([\w ]+), )'
)


def test_a_phase_has_one_colour_on_the_whole_page(page):
    """The step timeline's and the critical path's phases, from their slices' tips: each
    phase in one colour in both plots, no two phases alike, none a cause's colour."""
    from nsyswrap.html_report.palette import COLORS, LABEL_COLORS

    _, _, text = page
    seen = {(a or b, fill) for fill, a, b in PHASE_TIP.findall(text)}
    timeline = {a for _, a, _ in PHASE_TIP.findall(text) if a}
    path = {b for _, _, b in PHASE_TIP.findall(text) if b}
    assert "data_loading" in timeline & path and len(timeline) >= 3
    colour = dict(seen)
    assert len(colour) == len(seen)  # one colour per phase
    assert len(set(colour.values())) == len(colour)  # a colour per phase
    assert not set(colour.values()) & (set(COLORS.values()) | set(LABEL_COLORS.values()))


def test_palette_gives_every_phase_and_rank_a_colour_of_its_own():
    from nsyswrap.html_report.palette import (
        COLORS,
        LABEL_COLORS,
        WAIT_COLOR,
        phase_colors,
        rank_colors,
    )

    names = [f"phase{i}" for i in range(30)]
    phases = phase_colors(reversed(names))
    assert phases == phase_colors(names)  # by name, not by order of appearance
    assert len(set(phases.values())) == 30
    ranks = rank_colors(range(30), highlighted=7)
    assert ranks[7] == WAIT_COLOR and len(set(ranks.values())) == 30
    meanings = set(COLORS.values()) | set(LABEL_COLORS.values())
    assert not (set(phases.values()) | set(ranks.values()) - {WAIT_COLOR}) & meanings
    assert not set(phases.values()) & set(ranks.values())


def test_html_prints_the_path_only(cli, page, tmp_path):
    out, _, _ = page
    html = tmp_path / "page.html"
    code, printed, err = cli("report", out, "--html", html)
    assert code == 0 and html.exists()
    assert printed == "" and err.strip().endswith(f"wrote {html}")
    code, printed, _ = cli("report", out, "--html", html, "--force", "--section", "stragglers")
    assert code == 0 and printed.startswith("Straggler per step")  # the report where asked


def test_cli_refuses_to_overwrite_the_page(cli, page):
    out, html, _ = page
    code, _, err = cli("report", out, "--html", html)
    assert code == 1 and "already exists" in err
    assert cli("report", out, "--html", html, "--force", "-f", "json")[0] == 0


def _chromium(*args: str) -> str:
    """Run headless Chromium with `args` (quietly, no network of its own); its stdout."""
    quiet = ["--disable-background-networking", "--disable-component-update", "--disable-sync"]
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", *quiet, "--no-first-run", *args],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_page_renders_headless(page, tmp_path):
    _, html, _ = page
    png = tmp_path / "page.png"
    _chromium(f"--screenshot={png}", "--window-size=1400,900", html.as_uri())
    assert png.stat().st_size > 20_000  # a blank page is a few kB


MEASURE = """<script>window.addEventListener('load', () => {
  const d = document.documentElement, p = document.createElement('pre');
  p.textContent = 'MEASURED ' + d.scrollWidth + ' ' + d.clientWidth;
  document.body.appendChild(p);
});</script>"""


@pytest.fixture(scope="module")
def samples_page_text():
    """The page of a real sampled run (long capture commands in <pre>)."""
    from helpers.paths import FIXTURES

    from nsyswrap.html_report import samples_page
    from nsyswrap.report import report_of

    return samples_page(report_of([FIXTURES / "real" / "h200_sampled"]))


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
@pytest.mark.parametrize("which", ["page", "samples_page_text"])
def test_page_has_no_horizontal_scroll_at_1280_px(which, request, tmp_path):
    """Laid out by headless Chromium in a 1,280 px window: the page is no wider than the
    window (a table wider than that scrolls in its own box)."""
    text = request.getfixturevalue(which)
    text = text[2] if which == "page" else text
    measured = tmp_path / "measured.html"  # the page and a script that reports its width
    measured.write_text(text.replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    dom = _chromium("--window-size=1280,900", "--dump-dom", measured.as_uri())
    scroll, client = map(int, re.search(r"MEASURED (\d+) (\d+)", dom).groups())
    assert 1_200 < client <= 1_280 and scroll <= client


def test_one_colour_per_meaning():
    from nsyswrap.html_report.charts import LEDGER_PARTS
    from nsyswrap.html_report.palette import COLORS, LABEL_COLORS, PHASES, WAIT_COLOR

    assert not set(PHASES) & set(COLORS.values())  # phases never look like a cause
    assert not set(PHASES) & set(LABEL_COLORS.values())  # nor like a verdict
    assert [c for _, _, c in LEDGER_PARTS] == [
        COLORS[k] for k in ("compute", "both", "comm", "copy", "idle")
    ]
    assert (
        WAIT_COLOR
        == LABEL_COLORS["waiting-for-peers"]
        == LABEL_COLORS["straggler"]
        == COLORS["wait"]
    )
    assert LABEL_COLORS["communication-bound"] == COLORS["comm"]
    assert LABEL_COLORS["compute-bound"] == COLORS["compute"]
