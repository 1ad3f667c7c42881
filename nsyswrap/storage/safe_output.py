"""An input is never an output: the one check every command that writes a file makes
before any work (`check_writable`), and the one way a result file is written (`save`).

An output is refused, `--force` or not, when it is one of the command's inputs: the same
file by its device and inode (through a symbolic link or a hard link), a file an input
directory or glob expands to (its reports, sample files, `manifest.json`, a report's
`-wal` file), or a name an input glob would match. `--force` overwrites a file the
command itself wrote before (`wrote_before`) or a file that is no report; a report (a
SQLite file, an `.nsys-rep`, `.qdrep` or `.qdstrm` capture, a sample file) is never
overwritten. A character device (`/dev/null`, `/dev/stdout`) is written, not refused:
writing it destroys nothing.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import stat
import tempfile
from collections.abc import Iterable
from contextlib import contextmanager
from pathlib import Path

from nsyswrap.errors import NsysWrapError, limit_error
from nsyswrap.storage.validate import RAW_REPORT_SUFFIXES, SQLITE_MAGIC, special_file

READ_BESIDE = ("manifest.json",)  # read beside every report (its ranks)
IN_A_RUN = ("*.sqlite", "samples.rank*.jsonl", *READ_BESIDE)  # what a run directory gives
SAMPLE_HEAD = b'{"v":'


def check_writable(
    output: Path | None,
    force: bool,
    inputs: Iterable[str | Path] = (),
    *,
    option: str = "--output",
    wrote_before: bool = False,
) -> None:
    """Before any work: refuse `output` when it is one of `inputs`, a directory, a file
    that exists (unless `force`), a report (even with `force`, unless the command wrote it
    before: `wrote_before`), a FIFO, socket or block device, or when it cannot be written."""
    if output is None:
        return
    output = Path(output)
    refuse_input(output, inputs, option)
    try:
        mode = os.stat(output).st_mode
    except OSError:
        mode = None
    if mode is not None and stat.S_ISDIR(mode):
        raise NsysWrapError(
            output, "is a directory", f"give a file name, e.g. {option} DIR/result.csv"
        )
    if mode is not None and stat.S_ISCHR(mode):  # /dev/null, a terminal: nothing to destroy
        _probe(output, option, folder=None)
        return
    if mode is not None:
        _check_existing(output, mode, force, option, wrote_before)
    folder = output.absolute().parent
    if not folder.is_dir():
        raise NsysWrapError(
            output,
            f"cannot be written: directory {folder} does not exist",
            f"create it first or choose another {option}",
        )
    _probe(output, option, folder)


def _check_existing(output: Path, mode: int, force: bool, option: str, wrote_before: bool):
    if special_file(mode):  # opening a FIFO would wait; a block device holds a file system
        raise NsysWrapError(
            output,
            f"is {special_file(mode)}, not a regular file",
            f"choose a file name for {option} (or leave it out to print)",
        )
    report = None if wrote_before else report_kind(output)
    if report is not None:
        raise NsysWrapError(
            output,
            f"exists and is {report}, which is never overwritten (--force or not)",
            f"choose another {option}",
        )
    if not force:
        raise NsysWrapError(
            output, "already exists", f"pass --force to overwrite it or choose another {option}"
        )


def _probe(output: Path, option: str, folder: Path | None) -> None:
    """Refuse an output that cannot be written: a new file in `folder` (None: a device),
    or the file that exists opened to append (which changes nothing)."""
    try:
        if folder is not None:
            tempfile.TemporaryFile(dir=folder).close()
        if os.path.exists(output):
            open(output, "ab").close()
    except OSError as exc:
        raise NsysWrapError(
            output,
            f"cannot be written ({exc.strerror})",
            f"choose an {option} in a directory you can write to",
        ) from None


def refuse_input(output: Path, inputs: Iterable[str | Path], option: str = "--output") -> None:
    """Refuse `output` when it is one of `inputs` (`input_named`), --force or not."""
    same = input_named(output, inputs)
    if same is not None:
        raise NsysWrapError(
            output,
            ("is one of the inputs" if os.path.lexists(output) else "would be read as an input")
            + ("" if same == str(output) else f" ({same})"),
            f"choose another {option}: an input is never overwritten, --force or not",
        )


def input_named(output: Path, inputs: Iterable[str | Path]) -> str | None:
    """The input that `output` is (the same file, or a name an input glob matches), or
    None."""
    names = {str(output.absolute()), os.path.realpath(output)}
    for item in inputs:
        text = str(item)
        for pattern in _patterns(text):
            if any(fnmatch.fnmatchcase(n, pattern) for n in names):
                return text
        if os.path.lexists(output):
            for path in _files(text):
                if _same(output, path):
                    return str(path)
    return None


def _patterns(text: str) -> list[str]:
    """The absolute glob patterns of the files input `text` stands for (none for a plain
    file: its identity is compared instead)."""
    if glob.has_magic(text) and not os.path.lexists(text):
        return [
            os.path.abspath(text),
            os.path.join(os.path.realpath(os.path.dirname(text) or "."), os.path.basename(text)),
        ]
    if os.path.isdir(text):
        return [os.path.join(os.path.realpath(text), p) for p in IN_A_RUN]
    return []


def _files(text: str) -> list[Path]:
    """The files input `text` stands for, with what is read beside each report."""
    if glob.has_magic(text) and not os.path.lexists(text):
        found = [Path(p) for p in glob.glob(text)]
    elif os.path.isdir(text):
        found = [p for pattern in IN_A_RUN for p in Path(text).glob(pattern)]
    else:
        found = [Path(text)]
    beside = {p.parent / name for p in found for name in READ_BESIDE}
    wal = [p.with_name(p.name + suffix) for p in found for suffix in ("-wal", "-shm")]
    return [*found, *beside, *wal]


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def report_kind(path: Path) -> str | None:
    """What report `path` is (an SQLite export, a capture, a sample file), None when it
    is none (or cannot be read)."""
    if path.suffix in RAW_REPORT_SUFFIXES:
        return f"an Nsight Systems capture ({path.suffix})"
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(SQLITE_MAGIC))
    except OSError:
        return None
    if head == SQLITE_MAGIC:
        return "an SQLite file (a report?)"
    if head.replace(b" ", b"").startswith(SAMPLE_HEAD) and path.suffix == ".jsonl":
        return "a sample file"
    return None


def save(output: Path, data: str | bytes) -> None:
    """Write `data` (text as UTF-8, a character it cannot hold escaped) to `output` (see
    `writing`)."""
    with writing(output), open(output, "wb") as fh:
        fh.write(data.encode("utf-8", "backslashreplace") if isinstance(data, str) else data)


@contextmanager
def writing(output: Path):
    """A write to `output` that fails (no space left, a device that takes nothing, a file
    system gone read-only) is one line naming `output`."""
    try:
        yield
    except OSError as exc:
        raise limit_error(exc, output, output=True) or NsysWrapError(
            output,
            f"cannot be written ({exc.strerror or exc})",
            "choose another output file",
        ) from None
