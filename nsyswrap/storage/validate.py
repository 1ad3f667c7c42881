"""Checks that a path is a complete, readable Nsight Systems SQLite export."""

from __future__ import annotations

import errno
import os
import sqlite3
import stat
from pathlib import Path

from nsyswrap.errors import NsysWrapError

SQLITE_MAGIC = b"SQLite format 3\x00"
META_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")
EVENT_TABLES = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "NVTX_EVENTS",
    "OSRT_API",
)
RAW_REPORT_SUFFIXES = (".nsys-rep", ".qdrep", ".qdstrm")
EXPORT_HINT = "export it first: nsyswrap export RUN_DIR (or nsys export --type sqlite FILE)"


SPECIAL = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def special_file(mode: int) -> str | None:
    """What a file of `mode` (st_mode) is when it is no regular file or directory: opening a
    FIFO without a writer waits forever, a device or socket holds no report."""
    return next((what for test, what in SPECIAL if test(mode)), None)


def check_readable(path: Path) -> None:
    """Reject a path that cannot be reached or read (missing, broken or looping link,
    no permission, a FIFO, socket or device), naming why, before any work starts (and
    before anything opens it)."""
    try:
        mode = os.stat(path).st_mode
        if special_file(mode):
            raise NsysWrapError(
                path,
                f"is {special_file(mode)}, not a report file",
                "pass the .sqlite files themselves (or move it out of the run directory)",
            )
        if stat.S_ISDIR(mode):
            os.listdir(path)
        else:
            open(path, "rb").close()
    except FileNotFoundError:
        if os.path.islink(path):
            raise NsysWrapError(
                path, f"is a broken symbolic link (to {os.readlink(path)})", "check the path"
            ) from None
        raise NsysWrapError(path, "does not exist", "check the path") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NsysWrapError(
                path, "is a symbolic link loop", "point the link at a report"
            ) from None
        raise NsysWrapError(
            path,
            f"cannot be read ({exc.strerror})",
            "make it readable (and its directory searchable) or copy it somewhere readable",
        ) from None


def check_header(path: Path) -> None:
    """Reject missing, unreadable, empty, non-SQLite and truncated files without opening them."""
    check_readable(path)
    if path.is_dir():
        raise NsysWrapError(
            path, "is a directory inside a run directory", "pass the report files themselves"
        )
    if path.suffix in RAW_REPORT_SUFFIXES:
        raise NsysWrapError(path, "is an nsys report, not its SQLite export", EXPORT_HINT)
    size = path.stat().st_size
    if size == 0:
        raise NsysWrapError(path, "is an empty file", "re-export the report")
    with path.open("rb") as fh:
        head = fh.read(100)
    if not head.startswith(SQLITE_MAGIC):
        raise NsysWrapError(
            path,
            "is not an SQLite database",
            "pass the .sqlite file written by nsys export --type sqlite",
        )
    if len(head) < 100:
        raise NsysWrapError(
            path, "is truncated (incomplete SQLite header)", "re-export or copy the report again"
        )
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(head[28:32], "big")
    header_valid = head[24:28] == head[92:96]
    if size % page_size or (header_valid and pages * page_size > size):
        raise NsysWrapError(
            path,
            f"is truncated ({size} bytes, expected {pages * page_size})",
            "re-export or copy the report again",
        )


def inspect_tables(path: Path) -> dict[str, set[str]]:
    """The tables and columns of a valid nsys export; raises for anything else."""
    # (pyarrow loads with it: not for `check_readable`)
    from nsyswrap.storage.sqlite_source import connect_readonly, table_columns, wal_applied

    check_header(path)
    try:
        with wal_applied(path):
            con = connect_readonly(path)
            try:
                tables = table_columns(con)
                has_events = any(
                    con.execute(f'SELECT 1 FROM "{t}" LIMIT 1').fetchall()
                    for t in EVENT_TABLES
                    if t in tables
                )
            finally:
                con.close()
    except sqlite3.DatabaseError as exc:
        raise NsysWrapError(
            path, f"is a damaged SQLite file ({exc})", "re-export or copy the report again"
        ) from exc
    if "StringIds" not in tables or not any(t in tables for t in META_TABLES):
        raise NsysWrapError(
            path,
            "is an SQLite file but not an Nsight Systems export "
            "(no StringIds / META_DATA_EXPORT tables)",
            "pass a file written by nsys export --type sqlite",
        )
    if not has_events:
        raise NsysWrapError(
            path,
            "holds no events (no CUDA, NVTX or OS runtime tables)",
            "capture with nsys profile --trace=cuda,nvtx,osrt and export again",
        )
    return tables
