"""The self-contained HTML page of `nsyswrap report RUN --html PATH`, drawn from the
report's answer (nsyswrap.report.answer: its document, and what its plots draw), never
from a second round of queries."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nsyswrap.html_report.page import html_page
from nsyswrap.html_report.samples import samples_page
from nsyswrap.storage.safe_output import save

if TYPE_CHECKING:
    from pathlib import Path

    from nsyswrap.report.flow import Answer

__all__ = ["html_page", "samples_page", "write_page"]


def write_page(answer: Answer, path: Path) -> None:
    """Write the page of `answer` to `path`: with sample files (alone or beside exports)
    the page of the sampled steps, else the report's with its plots."""
    document = answer.document
    if any(s["id"] == "samples" for s in document["sections"]):
        text = samples_page(document)
    else:
        text = html_page(document, answer.plots)
    save(path, text)
