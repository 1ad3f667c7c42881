"""Which of `nsyswrap report`'s inputs are sample files (imports nothing heavy: a stored
answer of the nsys path is read without pandas)."""

from __future__ import annotations

import glob
from pathlib import Path

from nsyswrap.sample import schema


def split_inputs(inputs) -> tuple[list, list[Path]]:
    """(report inputs, sample files) of what `nsyswrap report` was given: `.jsonl` files
    and the sample files of each directory are samples; a directory is also a report input
    when it holds `.sqlite` exports or no sample file."""
    reports, samples = [], []
    for item in [inputs] if isinstance(inputs, (str, Path)) else inputs:
        text = str(item)
        if glob.has_magic(text) and not Path(text).exists():
            matches = [Path(p) for p in sorted(glob.glob(text))]
            found = [p for p in matches if p.suffix == ".jsonl"]
            samples += found
            if not found:  # the nsys path expands it (and says when it matches nothing)
                reports.append(item)
            else:
                reports += [p for p in matches if p.suffix != ".jsonl"]
        elif Path(text).is_dir():
            found = sorted(Path(text).glob(schema.FILE_PATTERN))
            samples += found
            if not found or any(Path(text).glob("*.sqlite")):
                reports.append(item)
        elif Path(text).suffix == ".jsonl":
            samples.append(Path(text))
        else:
            reports.append(item)
    return reports, samples
