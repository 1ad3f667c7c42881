"""The repository's generated fixtures: ``fixtures/<name>/rank{N}.sqlite`` + ``truth.json``."""

from __future__ import annotations

from pathlib import Path

from nsyswrap.synth.presets import PRESETS, preset
from nsyswrap.synth.run import generate_run

FIXTURES = ("run2", "run4_straggler", "edge_cases")
DEFAULT_ROOT = Path(__file__).resolve().parents[2] / "fixtures"
REMAKE = "python -m nsyswrap.synth fixtures"


def write_fixtures(root: str | Path = DEFAULT_ROOT) -> list[Path]:
    """(Re)write every fixture directory under ``root`` deterministically; return them."""
    written = []
    for name in FIXTURES:
        out = Path(root) / name
        generate_run(preset(name), out, force=True)
        (out / "README.md").write_text(
            f"# {name}\n\n{PRESETS[name][0]}.\n\n"
            f"Generated with planted ground truth (`truth.json`); remake with `{REMAKE}`.\n",
            encoding="utf-8",
        )
        written.append(out)
    return written
