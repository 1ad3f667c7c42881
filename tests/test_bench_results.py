"""RESULTS.md: a part run alone rewrites its own sections and keeps every other one."""

from __future__ import annotations

from pathlib import Path

from bench.results import GENERATED, render

RESULTS = Path(__file__).resolve().parents[1] / "bench" / "RESULTS.md"


def test_a_part_run_alone_keeps_the_sections_it_does_not_measure():
    previous = RESULTS.read_text()
    out = render(None, None, None, previous=previous)
    for heading in GENERATED:
        if heading in previous:
            section = previous.split(heading, 1)[1].split("\n## ", 1)[0]
            assert heading + section in out, heading
