"""Functions a reader can hold: none in nsyswrap/ is over 80 lines (the house rule), so
this test fails on a new one. KNOWN lists the ones of other engineers' areas still being
split, while they are (none now: the replay's lanes and streams and the sweep's device
timeline were split where they were written)."""

from __future__ import annotations

import ast

from helpers.paths import ROOT

MOST_LINES = 80
KNOWN: set[tuple[str, str]] = set()


def _long_functions() -> set[tuple[str, str, int]]:
    package = ROOT / "nsyswrap"
    found = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MOST_LINES:
                    found.add((path.relative_to(package).as_posix(), node.name, lines))
    return found


def test_no_function_is_over_80_lines():
    new = sorted(f for f in _long_functions() if f[:2] not in KNOWN)
    assert not new, f"over {MOST_LINES} lines: {new}"


def test_the_known_long_functions_are_still_long():
    """A function of KNOWN that was split leaves the list (so it cannot grow back)."""
    still = {f[:2] for f in _long_functions()}
    assert KNOWN <= still, f"split, remove from KNOWN: {sorted(KNOWN - still)}"
