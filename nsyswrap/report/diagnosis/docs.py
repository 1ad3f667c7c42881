"""The rules as the docs say them: generated from the rules themselves, so the docs and the
code cannot say two things (tests/test_rules.py checks every generated block).

A markdown file holds generated blocks between two comment lines:

    <!-- rule device_label (generated: python -m nsyswrap.report.diagnosis.docs FILE) -->
    ...the rule's doc, its thresholds written as their defaults...
    <!-- end rule device_label -->

    <!-- rules (generated: python -m nsyswrap.report.diagnosis.docs FILE) -->
    ...every rule: its id, kind, doc and a table of its thresholds...
    <!-- end rules -->

`python -m nsyswrap.report.diagnosis.docs FILE...` rewrites the blocks of each FILE.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from nsyswrap.report.diagnosis.rule import Rule
from nsyswrap.report.diagnosis.rules import RULES, rule

GENERATED = "(generated: python -m nsyswrap.report.diagnosis.docs FILE)"
BLOCK = re.compile(
    r"(<!-- (rules|rule ([a-z_]+)) \(generated[^)]*\) -->\n)(.*?)(<!-- end \2 -->)", re.S
)


def rule_markdown(r: Rule) -> str:
    """One rule: its doc (thresholds as their defaults), then its thresholds' table."""
    lines = [f"### `{r.id}` ({r.kind})", "", r.prose(), ""]
    if r.thresholds:
        lines += ["| threshold | default | what it decides |", "|---|---|---|"]
        lines += [f"| `{t.name}` | {t.text()} | {t.doc} |" for t in r.thresholds]
        lines.append("")
    return "\n".join(lines)


def reference() -> str:
    """Every rule, in the order they apply."""
    return "\n".join(rule_markdown(r) for r in RULES)


def _block(kind: str, rule_id: str | None) -> str:
    return (reference() if kind == "rules" else rule(rule_id).prose()) + "\n"


def synced(text: str) -> str:
    """`text` with every generated block written anew."""
    return BLOCK.sub(lambda m: m[1] + _block(m[2], m[3]) + m[5], text)


def stale(text: str) -> list[str]:
    """The generated blocks of `text` that differ from what the rules say."""
    return [m[2] for m in BLOCK.finditer(text) if m[4] != _block(m[2], m[3])]


def main(paths: list[str]) -> int:
    for p in map(Path, paths):
        text = p.read_text()
        if synced(text) != text:
            p.write_text(synced(text))
            print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
