"""Where things are: the repository, its fixtures, and the real exports beside it."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
SHARED = ROOT.parent / "shared"
PUBLIC = sorted((SHARED / "nsys-sqlite" / "public").glob("*.sqlite"))
FIXTURES = ROOT / "fixtures"
