"""What a text states that a report can check (nsyswrap.agent.claims checks it): each
number with a unit, and each rank, step and phase it names, with where it stands.

* A number has a unit written after it: a time (ns, us, ms, s), a percentage, a ratio
  (`1.3x`), a bandwidth (GB/s), a size (bytes, MB, GiB, ...), ppb, TFLOP/s, or a count
  noun (`10 steps`, `19 of 19 collectives`). `+`/`-` before it is its sign; `per step`
  (or `/step`) after it, or `in total` / `over the run`, its basis. A number without a
  unit (`1` of a numbered list, a version, `rank0.sqlite`) is no claim.
* `rank 2`, `ranks 0, 1 and 3`, `ranks 0-3`; `step 8`, `steps 0-9`: ranks and steps named.
* A phase is named in backticks (`` `data_loading` ``); a word that is a phase of the
  report (`known`) is context only.
* Text tables (a header over a rule of dashes, as `nsyswrap report` prints them, or a
  Markdown table): a cell's unit is its column header's (`mean ms`, `comp %`, `waited
  ms/step`), its rank, step or phase the row's (columns `rank`, `step`, `phase`).

A claim's context is what its clause names (the clauses of a sentence are split at commas,
colons, semicolons and brackets), else its sentence, else the nearest sentence before it
in its paragraph that names one: "It arrives last ..." after "Rank 2 is ..." is rank 2's.
One step (`step 8`) is context; several (`steps 3,7,10`) are not: a figure over them is
of no one step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

TIME = {"ns": 1, "us": 1e3, "µs": 1e3, "μs": 1e3, "ms": 1e6, "s": 1e9}
TIME_WORDS = {"nanoseconds": 1, "microseconds": 1e3, "milliseconds": 1e6, "seconds": 1e9}
TIME_WORDS |= {"sec": 1e9, "secs": 1e9, "second": 1e9}
SIZE = {"B": 1, "kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}
SIZE |= {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
RATE = {"MB/s": 1e-3, "GB/s": 1, "TB/s": 1e3, "GiB/s": 2**30 / 1e9}
OTHER = {"%": "%", "percent": "%", "x": "x", "×": "x", "ppb": "ppb"}
OTHER |= {"TFLOP/s": "TFLOP/s", "TFLOPS": "TFLOP/s", "bytes": "bytes", "byte": "bytes"}
COUNTS = (
    "steps step collectives collective ranks rank GPUs GPU gpus devices device kernels "
    "kernel calls call launches gaps gap reports groups streams events ranges copies "
    "samples times members ops iterations processes nodes hosts"
).split()
NUMBER = r"(?<![\w.,/:#])([+\-−]?)(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?"
_UNIT = re.compile(
    r"\s?(?P<unit>"
    + "|".join(
        re.escape(u)
        for u in sorted([*TIME, *SIZE, *RATE, *OTHER], key=len, reverse=True)
        if u not in ("percent", "bytes", "byte")
    )
    + r")(?!\w)"
    + r"|\s(?P<word>(?i:"
    + "|".join([*TIME_WORDS, "percent", "bytes", "byte"])
    + r"))\b"
    + r"|(?:\s+of\s+(?P<of>\d+))?\s+(?P<count>(?i:"
    + "|".join(COUNTS)
    + r"))\b(?!\s*\d)"
)
_PER_STEP = re.compile(r"\s*(?:/\s*step|per\s+(?:affected\s+)?step|(?:a|each|every)\s+step)\b")
_TOTAL = re.compile(r"\s*(?:in\s+(?:total|all)|over\s+the\s+(?:run|window|span|capture))\b")
_IDS = re.compile(
    r"\b(?P<what>ranks?|steps?)\s+(?P<ids>\d+(?:\s*(?:-|–|to)\s*\d+)?"
    r"(?:(?:\s*,\s*|\s*,?\s+and\s+|\s*&\s*)\d+(?:\s*(?:-|–|to)\s*\d+)?)*)(?![\d.%\w])",
    re.IGNORECASE,
)
_PHASE = re.compile(r"`([A-Za-z_][\w.:\-/]*)`")
_CLAUSE = re.compile(r"[,;:()\[\]]")
_SENTENCE = re.compile(r"(?<=[.!?;])\s+")
_ITEM = re.compile(r"^\s*(?:\d+[.)]?|[-*•])\s+\S")
_RULE = re.compile(r"^\s*-{2,}(?:\s+-{2,})+\s*$")
_MD_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)+\|?\s*$")


@dataclass
class Context:
    """The ranks, steps and phases a claim's clause, sentence or row names."""

    ranks: set[int] = field(default_factory=set)
    steps: set[int] = field(default_factory=set)
    phases: set[str] = field(default_factory=set)


@dataclass
class Mention:
    """One thing the text states. kind: number, rank, step or phase."""

    line: int
    text: str
    kind: str
    value: float | list | str
    unit: str | None = None  # number: ns, %, x, GB/s, bytes, count, or as the report has it
    scale: tuple[float, ...] = (1.0,)  # number: to the unit (a size in MB: 1e6 or 2**20)
    digits: int = 0  # number: decimals printed
    signed: bool = False  # number: written with + or -
    basis: str | None = None  # number: "per step", "total" or None
    context: Context = field(default_factory=Context)  # number: named here or before
    named: Context = field(default_factory=Context)  # number: named by its own sentence
    words: set[str] = field(default_factory=set)  # number: of its sentence or column header
    noun: str | None = None  # a count: what it counts, singular (`step`)
    of: float | None = None  # a count N of M: M (`13 of 15 steps`)
    written: str = ""  # number: its unit as written (`ms`, `%`, `steps`)


def read(text: str, known_phases: set[str]) -> list[Mention]:
    """Every mention of `text` (see the module doc), in the order written."""
    lines = text.splitlines()
    table_lines, found = set(), []
    for start, end, header, rows in _tables(lines):
        table_lines |= set(range(start, end))
        found += _table_mentions(header, rows)
    prose = [(i, ln) for i, ln in enumerate(lines) if i not in table_lines]
    for paragraph in _paragraphs(prose):
        found += _prose_mentions(paragraph, known_phases)
    return sorted(found, key=lambda m: m.line)


def number(match: re.Match, line: int, following: str) -> Mention | None:
    """The number of `match` (NUMBER) with the unit and basis `following` it; None
    without a unit."""
    sign, whole, decimals = match.groups()
    unit = _UNIT.match(following)
    if unit is None:
        return None
    value = float(whole.replace(",", "") + ("." + decimals if decimals else ""))
    value = -value if sign in ("-", "−") else value
    name, scale = _unit(unit)
    rest = following[unit.end() :]
    basis = "per step" if _PER_STEP.match(rest) else "total" if _TOTAL.match(rest) else None
    written = match.group(0) + following[: unit.end()]
    found = Mention(
        line, written.strip(), "number", value, name, scale, len(decimals or ""), bool(sign), basis
    )
    if unit["of"]:  # N of M steps: M counts the steps, N some of them
        found.of = float(unit["of"])
    elif unit["count"]:
        found.noun = singular(unit["count"])
    found.written = (unit["unit"] or unit["word"] or unit["count"]).strip()
    return found


def singular(noun: str) -> str:
    """`steps` -> `step`, `GPUs` -> `gpu`, `copies` -> `copy`."""
    noun = noun.lower()
    return noun[:-3] + "y" if noun.endswith("ies") else noun.removesuffix("s")


def words_of(text: str) -> set[str]:
    """The lower-case words of `text` of three letters or more (`host-bound`: host, bound)."""
    return {w for w in re.findall(r"[a-z][a-z0-9]{2,}", text.lower())}


def _unit(m: re.Match) -> tuple[str, tuple[float, ...]]:
    """(unit, scales to it) of a _UNIT match."""
    if m["count"]:
        return "count", (1.0,)
    text = m["unit"] or m["word"].lower()
    if text in TIME or text in TIME_WORDS:
        return "ns", (TIME.get(text) or TIME_WORDS[text],)
    if text in SIZE:
        binary = {"kB": 2**10, "KB": 2**10, "MB": 2**20, "GB": 2**30, "TB": 2**40}
        return "bytes", (SIZE[text], *([binary[text]] if text in binary else []))
    if text in RATE:
        return "GB/s", (RATE[text],)
    return OTHER[text], (1.0,)


def _numbers(text: str) -> list[tuple[int, Mention]]:
    """(where, mention) of each number with a unit in `text`."""
    found = []
    for m in re.finditer(NUMBER, text):
        mention = number(m, 0, text[m.end() :])
        if mention is not None:
            found.append((m.start(), mention))
    return found


def _ids(text: str) -> list[int]:
    """The numbers of `0, 1 and 3` or `0-9` (a range: every number in it)."""
    out = []
    for a, b in re.findall(r"(\d+)(?:\s*(?:-|–|to)\s*(\d+))?", text):
        out += list(range(int(a), int(b) + 1)) if b and int(b) >= int(a) else [int(a)]
    return out


def _prose_mentions(paragraph: list[tuple[int, str]], known: set[str]) -> list[Mention]:
    """The mentions of one paragraph, each number with its context (see the module doc)."""
    text, starts = "", []
    for i, line in paragraph:
        starts.append((len(text), i))
        text += line.strip() + " "

    def line_at(pos: int) -> int:
        return max(i for at, i in starts if at <= pos)

    found, before = [], Context()
    pos = 0
    for sentence in _SENTENCE.split(text):
        offset = text.index(sentence, pos)
        pos = offset + len(sentence)
        ids = [(m.start(), m.end(), m) for m in _IDS.finditer(sentence)]
        phases = [(m.start(), m.group(1)) for m in _PHASE.finditer(sentence)]
        words = {
            (m.start(), m.group(0))
            for m in re.finditer(r"[A-Za-z_][\w]*", sentence)
            if m.group(0) in known
        }
        cuts = [
            m.start()
            for m in _CLAUSE.finditer(sentence)
            if not any(a <= m.start() < b for a, b, _ in ids)
        ]
        whole = _context(ids, phases, words, 0, len(sentence))
        for start, _, m in ids:
            kind = m["what"].lower().rstrip("s")
            found.append(Mention(line_at(offset + start), m.group(0), kind, _ids(m["ids"])))
        for at, name in phases:
            found.append(Mention(line_at(offset + at), f"`{name}`", "phase", name))
        for at, n in _numbers(sentence):
            low = max([c for c in cuts if c <= at], default=0)
            high = min([c for c in cuts if c > at], default=len(sentence))
            clause = _context(ids, phases, words, low, high)
            n.line = line_at(offset + at)
            n.named = _merged(clause, whole)
            n.context = _merged(clause, whole, before)
            n.words = words_of(sentence)
            found.append(n)
        before = _merged(whole, before, Context())
    return found


def _context(ids, phases, words, low: int, high: int) -> Context:
    """What the part `low` to `high` of a sentence names."""
    c = Context()
    for start, _, m in ids:
        if low <= start < high:
            if m["what"].lower().startswith("rank"):
                c.ranks.update(_ids(m["ids"]))
            elif m["what"].lower() == "step":  # `steps 3,7,10`: a figure over them, not of one
                c.steps.update(_ids(m["ids"]))
    c.phases = {name for at, name in [*phases, *words] if low <= at < high}
    return c


def _merged(*contexts: Context) -> Context:
    """Each of ranks, steps and phases from the first context that names any."""
    out = Context()
    for kind in ("ranks", "steps", "phases"):
        setattr(
            out, kind, next((set(getattr(c, kind)) for c in contexts if getattr(c, kind)), set())
        )
    return out


def _paragraphs(lines: list[tuple[int, str]]) -> list[list[tuple[int, str]]]:
    """Runs of lines split at blank lines, list items and breaks in the line numbers."""
    out: list[list[tuple[int, str]]] = []
    last = None
    for i, line in lines:
        if not line.strip():
            last = None
            continue
        if last is None or i != last + 1 or _ITEM.match(line):
            out.append([])
        out[-1].append((i, line))
        last = i
    return out


def _tables(lines: list[str]):
    """(first line, end line, header per column, rows: [(line, cells)]) of each text or
    Markdown table."""
    for i, line in enumerate(lines):
        if _RULE.match(line) and i > 0:
            spans = [(m.start(), m.end()) for m in re.finditer(r"-+", line)]
            yield _text_table(lines, i, spans)
        elif _MD_RULE.match(line) and i > 0 and "|" in lines[i - 1]:
            yield _markdown_table(lines, i)


def _fits(line: str, spans: list[tuple[int, int]]) -> bool:
    words = [(m.start(), m.end()) for m in re.finditer(r"\S+", line)]
    return bool(words) and all(any(a <= s and e <= b for a, b in spans) for s, e in words)


def _cells(line: str, spans: list[tuple[int, int]]) -> list[str]:
    return [line[a:b].strip() for a, b in spans]


def _text_table(lines: list[str], rule: int, spans):
    top = rule
    while top > 0 and _fits(lines[top - 1], spans):
        top -= 1
    header = [
        " ".join(parts).strip() for parts in zip(*(_cells(ln, spans) for ln in lines[top:rule]))
    ]
    end = rule + 1
    while end < len(lines) and _fits(lines[end], spans):
        end += 1
    rows = [(j, _cells(lines[j], spans)) for j in range(rule + 1, end)]
    return top, end, header, rows


def _markdown_table(lines: list[str], rule: int):
    def split(line: str) -> list[str]:
        return [c.strip() for c in line.strip().strip("|").split("|")]

    end = rule + 1
    while end < len(lines) and lines[end].strip().startswith("|"):
        end += 1
    rows = [(j, split(lines[j])) for j in range(rule + 1, end)]
    return rule - 1, end, split(lines[rule - 1]), rows


def _table_mentions(header: list[str], rows) -> list[Mention]:
    """A table's cells with a unit (in the cell or its column header), in the context of
    their row; the row's ranks and steps."""
    names = [h.lower() for h in header]
    found = []
    for line, cells in rows:
        c = Context()
        for name, cell in zip(names, cells):
            if name in ("rank", "step") and cell.isdigit():
                (c.ranks if name == "rank" else c.steps).add(int(cell))
                found.append(Mention(line, f"{name} {cell}", name, [int(cell)]))
            elif name == "phase" and cell:
                c.phases.add(cell.strip("`"))
        for name, head, cell in zip(names, header, cells):
            if name in ("rank", "step", "phase"):
                continue
            m = re.match(r"\s*" + NUMBER, cell)
            if m is None:
                continue
            n = number(m, line, cell[m.end() :] or " " + _header_unit(head))
            if n is not None:
                n.text, n.context, n.named = f"{head}: {cell}", c, c
                n.words = words_of(head)
                found.append(n)
    return found


def _header_unit(head: str) -> str:
    """The unit a column header ends with, as text that follows a number (`ms/step`
    from `waited ms/step`; `steps` from `steps`)."""
    words = head.split()
    return words[-1] if words else ""
