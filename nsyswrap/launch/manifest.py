"""The run manifest (`<out>/manifest.json`) and the per-rank records it is assembled from.

Every rank's wrapper writes `<out>/ranks/<host>.rank<N>.json` when it starts and when it
ends (on whichever node it runs); the launcher folds them into the manifest.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path

from nsyswrap.errors import NsysWrapError

MANIFEST = "manifest.json"
RANKS_DIR = "ranks"
SAMPLE_FILES, CAPTURE_FILES = "samples.rank*.jsonl", "capture.*.json"  # launch --sample writes them


def now_utc() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def write_json(path: Path, data: dict) -> None:
    """Write atomically: readers see the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    os.replace(tmp, path)


def rank_record_path(out: Path, host: str, rank: int) -> Path:
    return Path(out) / RANKS_DIR / f"{host}.rank{rank}.json"


def read_rank_records(out: Path) -> list[dict]:
    records = [json.loads(p.read_text()) for p in (Path(out) / RANKS_DIR).glob("*.json")]
    return sorted(records, key=lambda r: (r["rank"], r["host"]))


def write_manifest(out: Path, manifest: dict) -> Path:
    """Write the manifest with the rank records found so far; returns its path."""
    ranks = read_rank_records(out)
    path = Path(out) / MANIFEST
    write_json(path, {**manifest, "hosts": sorted({r["host"] for r in ranks}), "ranks": ranks})
    return path


def files_of_run(out: Path) -> set[Path]:
    """The files a previous launch into `out` wrote, by its manifest and rank records: the
    only files `launch --force` may delete. Raises when `out` holds no nsyswrap manifest."""
    out = Path(out)
    try:
        manifest = json.loads((out / MANIFEST).read_text())
        if "nsyswrap_version" not in manifest or "launched" not in manifest:
            raise ValueError("not written by nsyswrap launch")
        records = [*manifest.get("ranks", []), *read_rank_records(out)]
        names, ranks_names = {MANIFEST}, set()
        for record in records:
            stem = f"{record['host']}.rank{int(record['rank'])}"
            names.add(f"{stem}.qdstrm")
            ranks_names |= {
                f"{stem}.json",
                *(p.name for p in (out / RANKS_DIR).glob(f".{stem}.started*")),
            }
            for report in record.get("reports") or []:
                base = Path(str(report)).name.removesuffix(".nsys-rep")
                if _plain_name(base):
                    names |= {f"{base}.nsys-rep", f"{base}.sqlite", f"{base}.qdstrm"}
        names |= {Path(p).name for p in manifest.get("sqlite") or []}
        names |= {Path(p).name for key in ("samples", "captures") for p in manifest.get(key) or []}
    except (OSError, ValueError, RecursionError, TypeError, KeyError, AttributeError) as exc:
        raise NsysWrapError(
            out,
            f"is not a run nsyswrap launch wrote ({out / MANIFEST}: {exc})",
            "--force replaces only such runs: choose another --out",
        ) from None
    # Names only, always directly in `out`: a hand-edited manifest cannot point elsewhere
    # (nor name `out` itself: "", "." or "..").
    names, ranks_names = ({n for n in found if _plain_name(n)} for found in (names, ranks_names))
    return {out / n for n in names} | {out / RANKS_DIR / n for n in ranks_names}


def _plain_name(name: str) -> bool:
    """A file name in a directory: no path separator, not `.` or `..`, not empty."""
    return name not in ("", ".", "..") and "/" not in name
