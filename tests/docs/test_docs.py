"""The manual: the README is a first page whose map names every file of docs/, each link
of the manual leads to a file that exists, and the generated references (docs/cli.md,
docs/queries.md) are what `python -m nsyswrap.docs` writes today."""

from __future__ import annotations

import re

import pytest
from helpers.paths import ROOT

from nsyswrap import docs

DOCS = ROOT / "docs"
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.fixture(scope="module")
def references() -> dict[str, str]:
    return docs.references()


@pytest.mark.parametrize("name", ["cli.md", "queries.md"])
def test_generated_reference_is_current(references, name):
    committed = (DOCS / name).read_text()
    assert committed == references[name], f"docs/{name} is stale: run `{docs.COMMAND}`"


def test_the_cli_reference_holds_every_command(references):
    text = references["cli.md"]
    for command in ("launch", "export", "report", "diff", "query", "sql", "cache info"):
        assert f"\n## nsyswrap {command}\n" in text and f"Usage: nsyswrap {command}" in text


def test_the_readme_is_a_first_page_with_the_two_commands_first():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    first = text[: text.index("```", text.index("```bash") + 3)]
    assert (
        "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && "
        "nsyswrap report fixtures/run4_straggler" in first
    )
    assert "bash .ci/run" in first


def test_the_readme_maps_every_file_of_docs():
    linked = set(LINK.findall((ROOT / "README.md").read_text()))
    assert {f"docs/{p.name}" for p in DOCS.glob("*.md")} <= linked


@pytest.mark.parametrize("page", ["README.md", *(f"docs/{p.name}" for p in DOCS.glob("*.md"))])
def test_every_link_leads_to_a_file(page):
    path = ROOT / page
    for target in LINK.findall(path.read_text()):
        if "://" not in target:
            assert (path.parent / target).exists(), f"{page}: {target} does not exist"
