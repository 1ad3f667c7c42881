"""Finding the reports of a run and giving each its rank.

A rank comes, in this order, from the launcher's manifest beside the report,
from the file name (default pattern `rank(\\d+)`), from the `MPI Rank N` thread
name nsys's MPI tracing records, or from the process environment nsys recorded
(RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK, then SLURM_PROCID). When no
report carries a rank, ranks follow the order the reports were given in; so they do
when only some reports record a rank, or the recorded ranks repeat. Duplicate manifest
or file-name ranks are an error.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from nsyswrap.errors import NsysWrapError
from nsyswrap.storage.validate import EXPORT_HINT, RAW_REPORT_SUFFIXES, check_readable

DEFAULT_RANK_PATTERN = r"rank(\d+)"
ENV_RANKS = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID")
MANIFEST_NAME = "manifest.json"
MAX_RANK = 2**31 - 1  # ranks are 32-bit integers (MPI, torch.distributed, the views' rank)


@dataclass(frozen=True)
class Report:
    rank: int
    path: Path
    rank_source: str  # manifest, file name, MPI rank (nsys), environment (VAR) or order


def expand(inputs: str | Path | list[str | Path]) -> list[Path]:
    """Files from paths, directories (their *.sqlite) and glob patterns, in the given order."""
    if isinstance(inputs, (str, Path)):
        inputs = [inputs]
    found: list[Path] = []
    for item in inputs:
        text = str(item)
        path = Path(text)
        if os.path.lexists(text) or not glob.has_magic(text):
            check_readable(path)
        if path.is_dir():
            reports = sorted(path.glob("*.sqlite"), key=_natural_key)
            if not reports:
                raw = [p for p in path.iterdir() if p.suffix in RAW_REPORT_SUFFIXES]
                fix = EXPORT_HINT if raw else "pass a directory holding .sqlite exports"
                raise NsysWrapError(path, "holds no .sqlite reports", fix)
            for report in reports:  # (a FIFO among them must be refused before it is opened)
                check_readable(report)
            found.extend(reports)
        elif not path.exists() and glob.has_magic(text):
            matches = sorted((Path(p) for p in glob.glob(text)), key=_natural_key)
            if not matches:
                raise NsysWrapError(text, "matches no files", "check the pattern")
            for match in matches:
                check_readable(match)
            found.extend(matches)
        else:
            found.append(path)
    if not found:
        raise NsysWrapError(
            None, "no reports given", "pass one or more .sqlite files or a run directory"
        )
    return found


def _natural_key(path: Path) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", path.name)]


def _manifest_rank(path: Path) -> int | None:
    """The rank the launcher's manifest beside `path` gives it; None without a manifest (or
    with a `manifest.json` that is no launch manifest: not an object with a `ranks` list)
    or when the manifest does not name the report. A manifest entry naming the report whose
    rank is not a whole number from 0 to MAX_RANK (a hand edit) is an error."""
    found = _manifest_entry(path)
    if found is None:
        return None
    manifest, _, entry = found
    rank = entry.get("rank")
    if isinstance(rank, str) and re.fullmatch(r"[0-9]+", rank):
        rank = int(rank)
    if isinstance(rank, bool) or not isinstance(rank, int):
        said = "no rank" if rank is None else f"the rank {rank!r:.40}, not a whole number"
        raise NsysWrapError(
            manifest,
            f"gives {path.name} {said}",
            "fix or remove the manifest (nsyswrap launch writes it)",
        )
    return _checked(rank, path, f"from {manifest}")


def launch_trace(path: Path) -> str | None:
    """The `--trace` value `nsyswrap launch` gave nsys for the report at `path` (e.g.
    "cuda,nvtx,osrt"), from its manifest beside the report when that names the report;
    None otherwise."""
    found = _manifest_entry(path)
    options = found[1].get("options") if found else None
    trace = options.get("trace") if isinstance(options, dict) else None
    return trace if isinstance(trace, str) else None


def _manifest_entry(path: Path) -> tuple[Path, dict, dict] | None:
    """(manifest, its contents, its ranks entry naming the report at `path`) of the launch
    manifest beside it; None without one, or when it does not name the report. An entry
    that is not an object is an error."""
    manifest = path.parent / MANIFEST_NAME
    if not manifest.is_file():
        return None
    try:
        data = json.loads(manifest.read_text())
        entries = data["ranks"]
    except (OSError, ValueError, RecursionError, TypeError, KeyError):
        return None
    if not isinstance(entries, list):
        return None
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise NsysWrapError(
                manifest,
                f"entry {i} of its ranks is {type(entry).__name__} {entry!r:.40}, not an object",
                "fix or remove the manifest (nsyswrap launch writes it)",
            )
        named = [entry.get("sqlite"), entry.get("report"), *_list(entry.get("reports"))]
        if any(
            isinstance(n, str) and path.name in (Path(n).name, Path(n).stem + path.suffix)
            for n in named
        ):
            return manifest, data, entry
    return None


def _list(value) -> list:
    return value if isinstance(value, list) else []


def _checked(rank: int, path: Path, source: str) -> int:
    """`rank` if it can be a rank (0 to MAX_RANK), else the one-line error."""
    if not 0 <= rank <= MAX_RANK:
        raise NsysWrapError(
            path,
            f"has rank {rank} ({source}), outside 0 to {MAX_RANK:,}",
            "give it its real rank (rename it, or pass --rank-pattern)",
        )
    return rank


def _rows(con, sql: str) -> list[str]:
    try:
        return [v for (v,) in con.execute(sql).fetchall() if isinstance(v, str)]
    except Exception:  # table absent in this nsys version
        return []


def _recorded_rank(path: Path) -> tuple[int | None, str]:
    """(rank, source) from what nsys recorded: the thread name its MPI tracing gives
    (`MPI Rank N`), else the process environment (capture metadata, then the target's
    DeviceEnvironment), variables in ENV_RANKS order. SLURM_PROCID is last: under
    mpirun inside one SLURM task it is 0 on every rank."""
    from nsyswrap.storage.sqlite_source import (  # (pyarrow: not for `expand`)
        connect_readonly,
        wal_applied,
    )

    with wal_applied(path):
        return _recorded_in(connect_readonly(path), path)


def _recorded_in(con, path: Path) -> tuple[int | None, str]:
    """`_recorded_rank` read over `con`, the report's connection (closed here)."""
    try:
        mpi = {
            m.group(1)
            for v in _rows(con, "SELECT text FROM NVTX_EVENTS WHERE eventType = 39")
            if (m := re.fullmatch(r"MPI Rank ([0-9]+)", v))
        }
        if len(mpi) == 1:
            return _checked(int(mpi.pop()), path, "from its MPI thread name"), "MPI rank (nsys)"
        env = _rows(
            con,
            "SELECT value FROM META_DATA_CAPTURE WHERE name LIKE 'PROCESS_%:ENVIRONMENT_VARIABLE'",
        )
        for blob in _rows(
            con, "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'DeviceEnvironment'"
        ):
            env += re.split(r"[\x00;\n]", blob)
    finally:
        con.close()
    for name in ENV_RANKS:
        ranks = {m.group(1) for v in env if (m := re.fullmatch(name + r'="?([0-9]+)"?', v))}
        if len(ranks) == 1:
            rank = _checked(int(ranks.pop()), path, f"from {name} in its environment")
            return rank, f"environment ({name})"
    return None, "environment"


def capture_identity(path: Path) -> tuple | None:
    """(session start in UTC ns, host, the processes' pids) of a report, or None when it
    records no session start or no process: two reports alike are one capture."""
    from nsyswrap.storage.sqlite_source import (
        connect_readonly,  # (it loads pyarrow: not for `expand`)
    )

    con = connect_readonly(path)
    try:
        start = _values(con, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")
        host = _rows(con, "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'Hostname'")
        pids = _values(con, "SELECT DISTINCT pid FROM PROCESSES")
    finally:
        con.close()
    return (start[0], tuple(host), tuple(sorted(pids))) if start and pids else None


def _values(con, sql: str) -> list[int]:
    try:
        return [v for (v,) in con.execute(sql).fetchall() if isinstance(v, int)]
    except Exception:  # table absent in this nsys version
        return []


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def refuse_duplicates(paths: list[Path]) -> None:
    """Raise when two reports are one capture: the same content (a copy), or the same
    session start to the ns and the same processes on the same host, which two captures
    never share. Analysed as two ranks they would be a rank waiting for itself. (One file
    given twice is assign_ranks' error.)"""
    files = list({p.resolve(): p for p in paths}.values())
    seen: dict[tuple, Path] = {}
    for path in files:
        key = capture_identity(path)
        if key is not None and key in seen:
            pids = ", ".join(map(str, key[2]))
            raise NsysWrapError(
                path,
                f"is the same capture as {seen[key]} (session start "
                f"{key[0]} ns UTC, processes {pids})",
                "give each capture once",
            )
        seen.setdefault(key, path)
    by_size: dict[int, list[Path]] = {}
    for path in files:
        by_size.setdefault(path.stat().st_size, []).append(path)
    for same_size in (ps for ps in by_size.values() if len(ps) > 1):
        digests: dict[str, Path] = {}
        for path in same_size:
            first = digests.setdefault(_digest(path), path)
            if first is not path:
                raise NsysWrapError(
                    path, f"has the same content as {first}", "give each capture once"
                )


def _named_rank(found: str | None, path: Path, rank_pattern: str) -> int:
    """The rank that the group of `--rank-pattern` found in the file name."""
    if found is None or not re.fullmatch(r"[0-9]+", found):
        raise NsysWrapError(
            f"--rank-pattern {rank_pattern}",
            f"finds {found!r} in {path.name}, not a rank number",
            r"make its group match the digits, e.g. 'rank(\d+)'",
        )
    return _checked(int(found), path, "from its file name")


def assign_ranks(paths: list[Path], rank_pattern: str = DEFAULT_RANK_PATTERN) -> list[Report]:
    """Give every report its rank; raise on duplicates or on a run that mixes named and unnamed."""
    try:
        pattern = re.compile(rank_pattern)
    except re.error as exc:
        raise NsysWrapError(
            f"--rank-pattern {rank_pattern}",
            f"is not a regular expression ({exc})",
            r"write e.g. 'rank(\d+)'",
        ) from None
    if pattern.groups < 1:
        raise NsysWrapError(
            f"--rank-pattern {rank_pattern}",
            "has no group for the rank number",
            r"write e.g. 'rank(\d+)'",
        )
    found: list[tuple[Path, int | None, str]] = []
    for path in paths:
        rank, source = _manifest_rank(path), "manifest"
        if rank is None and (m := pattern.search(path.name)):
            rank, source = _named_rank(m.group(1), path, rank_pattern), "file name"
        if rank is None:
            rank, source = _recorded_rank(path)
        found.append((path, rank, source))
    if all(source not in ("manifest", "file name") for _, _, source in found):
        # only recorded ranks: used when every report has one and they differ (e.g. every
        # rank may record SLURM_PROCID=0), else the order given
        recorded = [rank for _, rank, _ in found]
        if None in recorded or len(set(recorded)) < len(recorded):
            return [Report(i, path, "order") for i, (path, _, _) in enumerate(found)]
    missing = [path for path, rank, _ in found if rank is None]
    if missing:
        raise NsysWrapError(
            missing[0],
            f"has no rank in its name (pattern {rank_pattern!r}) or capture environment, "
            "unlike the other reports",
            "rename it (e.g. rank3.sqlite), pass --rank-pattern, or analyse it on its own",
        )
    seen: dict[int, Path] = {}
    for path, rank, _ in found:
        if rank in seen:
            if seen[rank].resolve() == path.resolve():
                raise NsysWrapError(path, "is given twice", "pass each report once")
            raise NsysWrapError(
                path, f"has rank {rank}, like {seen[rank]}", "pass one report per rank"
            )
        seen[rank] = path
    return sorted(
        (Report(rank, path, source) for path, rank, source in found), key=lambda r: r.rank
    )
