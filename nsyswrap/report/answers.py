"""Stored answers: a report asked again (the same reports, options and nsyswrap) is read
back, not computed, and without loading pandas, DuckDB or pyarrow.

The store's entry `answers/report-<key>/answer.json` (`nsyswrap.storage.store`) holds the report's
JSON document, exactly what `--format json` prints, written whole and then renamed; beside
it, where the page was asked for, `answers/plots-<key>/plots.json`: what the HTML page's
plots draw (nsyswrap.report.plots), so `--html` is drawn from a stored answer too. The key
covers everything the answer depends on:

* each report's version, as its cache entry is keyed (`cache_keys.report_key`: resolved
  path, inode, ctime, size, mtime, content, view format), and the `manifest.json` beside it;
* the inputs as expanded, in order (the paths the answer names), the rank pattern and
  whether unrelated reports are allowed;
* the report options, nsyswrap's code (Python and SQL) and version.

A hit skips validating the reports and giving them ranks, rightly: both read only what
the key covers. Ranks come from the manifest beside a report, its file name (with the rank
pattern) or what the report recorded (its content); validation reads the report's header
and tables (its content again, as the views' cache entry trusts it). Where a report cannot
be read for its key, there is no key and the report is computed (and fails) as without a
stored answer. The engine and `-j` are not in the key: they give the same answer. Only
reports that were built are stored: an error is never stored, so it is raised again.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

from nsyswrap.errors import NsysWrapError, note
from nsyswrap.report.options import ReportOptions
from nsyswrap.report.render import to_json
from nsyswrap.storage import store
from nsyswrap.storage.cache_keys import code_digest, nsyswrap_version, report_key
from nsyswrap.storage.reports import MANIFEST_NAME

if TYPE_CHECKING:
    from nsyswrap.report.flow import Answer

KIND = "answers"
FILE = "answer.json"
PLOTS = "plots.json"


def answer_entry(
    paths: list[Path], options: ReportOptions, rank_pattern: str, allow_unrelated: bool
) -> Path | None:
    """The store entry of the report of `paths` (the inputs expanded) with these options;
    None when a report or its manifest cannot be read (the report is then computed)."""
    try:
        reports = [report_key(p) for p in paths]
        manifests = {
            str(d): _manifest(d / MANIFEST_NAME) for d in sorted({p.parent for p in paths})
        }
    except OSError:
        return None
    return store.entry(
        KIND,
        "report",
        reports,
        [str(p) for p in paths],
        sorted(manifests.items()),
        rank_pattern,
        allow_unrelated,
        sorted(options.all_params().items()),
        code_digest(),
        nsyswrap_version(),
    )


def _manifest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def load(entry: Path | None) -> dict | None:
    """The stored answer of `entry`, if there is a sound one; a damaged one is removed
    (with a one-line note) and the report computed again."""
    if entry is None:
        return None
    path = entry / FILE
    try:
        answer = json.loads(path.read_bytes())
        if not isinstance(answer, dict) or answer.get("tool") != "nsyswrap":
            raise ValueError("not a report")
    except (FileNotFoundError, NotADirectoryError):  # none stored
        return None
    except OSError as exc:
        note(
            f"stored answer {path} cannot be read ({exc.strerror or exc}); "
            "computing the report again"
        )
        return None
    except (ValueError, RecursionError):
        store.discard(entry, f"stored answer {path} was damaged; computing the report again")
        return None
    store.use(entry)
    return answer


def _plots_entry(entry: Path) -> Path:
    """The entry of what the page's plots draw beside the answer of `entry` (same key)."""
    return entry.with_name("plots-" + entry.name.split("-", 1)[1])


def load_plots(entry: Path | None) -> dict | None:
    """What the page's plots draw, stored beside the answer of `entry` (None: not stored,
    or not readable: the report is computed again)."""
    if entry is None:
        return None
    plots = _plots_entry(entry)
    try:
        found = json.loads((plots / PLOTS).read_bytes())
    except (OSError, ValueError):
        return None
    store.use(plots)
    return found


def save(entry: Path | None, answer: Answer) -> None:
    """Store `answer` as the answer of `entry`, and its plots where it has them (each
    written whole, then renamed into place); a cache that cannot take it only costs the
    next call its speed."""
    if entry is None:
        return
    about = ", ".join(r["path"] for r in answer.document["reports"])
    try:
        store.write(entry, lambda work: (work / FILE).write_text(to_json(answer.document)), about)
        if answer.plots is not None:
            text = json.dumps(answer.plots)
            store.write(_plots_entry(entry), lambda work: (work / PLOTS).write_text(text), about)
    except (OSError, NsysWrapError) as exc:  # (a full disk is one, see store.write)
        why = getattr(exc, "strerror", None) or exc
        note(f"could not store the answer in {entry.parent} ({why})")
