"""The tools of `nsyswrap mcp` as plain functions (nsyswrap.agent.server serves them).

A tool takes runs by path (a run directory, a quoted glob or report files, relative to the
server's working directory) and returns plain JSON values: the report's own tables (ids,
columns, figures with their units, null with a reason, "cannot answer" with its reason),
exactly as `nsyswrap report --format json` has them, or the rows of a prebuilt query or of
read-only SQL, as `nsyswrap query/sql --format json` gives them. Reports open through the
command line's cache: a report asked before is its stored answer (nsyswrap.report.answers).
Bad input raises NsysWrapError, one line. A result holds at most `limit` rows (MAX_ROWS at
most) from `offset`, and says how many there are in all.
"""

from __future__ import annotations

import inspect
import threading
from dataclasses import dataclass, field, replace

from nsyswrap.engine.opener import DEFAULT_OPENER, Opener
from nsyswrap.engine.sql_guard import READ_ONLY_STATEMENTS
from nsyswrap.errors import NsysWrapError
from nsyswrap.report.figures import is_figure, part, table_ids

MAX_ROWS = 1000
ROWS = 200
DIFFS_KEPT = 8  # diffs answered again from memory (each a few seconds to compute)

RunPath = str | list[str]
Value = str | int | float | bool | None

ARGUMENTS = {
    "run": "the run: a run directory, a glob or report .sqlite files (a list), as "
    "`nsyswrap report` takes them; relative paths are from the server's working directory",
    "base": "the BASE run, as `run`",
    "new": "the NEW run, as `run`",
    "steps": "analyse only steps A to B-1, 'A:B' (either side may be left out)",
    "window_nvtx": "analyse only the span of NVTX ranges LIKE this, e.g. 'forward%'",
    "step_pattern": "LIKE pattern of the step ranges (default 'step:%')",
    "limit": f"rows to return, at most {MAX_ROWS} (default {ROWS})",
    "offset": "rows to skip first (to page through a long result)",
    "name": "report_section: a section or table id, or SECTION/TABLE; describe_query and "
    "run_query: a prebuilt query's name (list_queries)",
    "params": "parameter values by name",
    "sql": f"one read-only statement: {READ_ONLY_STATEMENTS}",
    "force": "compare runs the comparability check refuses",
    "text": "the text to check, as written",
    "step": "the step",
}
ARGUMENTS |= {
    column: f"keep the rows whose column {column} equals it"
    for column in ("kind", "rank", "phase", "stage", "pg", "op", "link")
}

REPORT_JSON = (
    "A row maps column names to plain values (rank, names) or figures "
    '{"value", "unit"} (ns, fraction, count, bytes, ...); a null value carries its "reason"; '
    'a section\'s "cannot_answer" lists what it cannot answer and why.'
)


@dataclass
class Tools:
    """The tools over runs opened by `opener`, without its progress bar."""

    opener: Opener = DEFAULT_OPENER
    _diffs: dict = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self.opener = replace(self.opener, progress=None)

    NAMES = (
        "report_diagnosis",
        "report_section",
        "whatif",
        "critical_path",
        "list_queries",
        "describe_query",
        "run_query",
        "list_views",
        "run_sql",
        "diff",
        "check_claims",
    )

    def report_diagnosis(
        self,
        run: RunPath,
        steps: str | None = None,
        window_nvtx: str | None = None,
        step_pattern: str = "step:%",
    ) -> dict:
        """The diagnosis of a run and the window analysed: `nsyswrap report --format json`
        without its sections (reports, ranks, options, window, diagnosis: the findings
        ranked by what fixing each would save, with their evidence, the key figures per
        device, the recommendations), and `contents`: each section's id, title, what it
        cannot answer, and its tables (id, title, rows) for report_section."""
        report = self.report(run, steps, window_nvtx, step_pattern)
        contents = [
            {
                "id": s["id"],
                "title": s["title"],
                "cannot_answer": s.get("cannot_answer", []),
                "tables": [
                    {"id": t["id"], "title": t["title"], "rows": len(t["rows"])}
                    for t in s.get("tables", [])
                ],
            }
            for s in report["sections"]
        ]
        return {**{k: v for k, v in report.items() if k != "sections"}, "contents": contents}

    def report_section(
        self,
        run: RunPath,
        name: str,
        limit: int = ROWS,
        offset: int = 0,
        steps: str | None = None,
        window_nvtx: str | None = None,
        step_pattern: str = "step:%",
    ) -> dict:
        """One section or one table of the report, as `nsyswrap report --format json` has
        it, named by its id or as SECTION/TABLE (report_diagnosis lists them): a section
        with its verdict, recommendations, tables and what it cannot answer; a table with
        its section, title, rows and `columns` (name and unit). Each table's rows from
        `offset`, at most `limit`, with `rows_total`."""
        report = self.report(run, steps, window_nvtx, step_pattern)
        found = part(report, name)
        if found is None:
            names = [s["id"] for s in report["sections"]] + table_ids(report)
            raise NsysWrapError(
                name,
                "is no section or table of this report",
                f"choose one of {', '.join(names)} (the diagnosis: report_diagnosis)",
            )
        section, table = found
        if table is not None:
            return {"section": section["id"], **paged_table(table, limit, offset)}
        tables = [paged_table(t, limit, offset) for t in section.get("tables", [])]
        return {**section, "tables": tables}

    def whatif(
        self,
        run: RunPath,
        kind: str | None = None,
        rank: int | None = None,
        phase: str | None = None,
        stage: int | None = None,
        pg: str | None = None,
        op: str | None = None,
        link: str | None = None,
        limit: int = ROWS,
        offset: int = 0,
        steps: str | None = None,
        window_nvtx: str | None = None,
        step_pattern: str = "step:%",
    ) -> dict:
        """What a fix would save: the rows of the report's `whatif` table (section crossrank)
        whose columns equal the values given (kind, rank, phase, stage, pg (process group),
        op (collective), link; each only where the table has that column); none given:
        every row. Rows that change nothing are not in the table."""
        given = {"kind": kind, "rank": rank, "phase": phase, "stage": stage}
        given |= {"pg": pg, "op": op, "link": link}
        window = (steps, window_nvtx, step_pattern)
        return self._rows_where(run, "whatif", given, limit, offset, *window)

    def critical_path(
        self,
        run: RunPath,
        step: int | None = None,
        limit: int = ROWS,
        offset: int = 0,
        steps: str | None = None,
        window_nvtx: str | None = None,
        step_pattern: str = "step:%",
    ) -> dict:
        """The critical path of a step: the rows of the report's `critical_path` table
        (section crossrank) of that step (none given: every step)."""
        given = {"step": step}
        return self._rows_where(
            run, "critical_path", given, limit, offset, steps, window_nvtx, step_pattern
        )

    def list_queries(self) -> dict:
        """The prebuilt queries (`nsyswrap list`): name, what one row is, scope (report:
        rows of each report alone; run: over the whole run) and parameters with their
        defaults. describe_query gives a query's columns."""
        from nsyswrap.engine.queries import catalog

        queries = [
            {
                "name": m.name,
                "row": m.summary,
                "scope": m.scope,
                "params": {p.name: p.default for p in m.params},
            }
            for m in catalog().values()
        ]
        return {"queries": queries}

    def describe_query(self, name: str) -> dict:
        """A prebuilt query's header: what one row is, its scope, what it reads, its
        parameters (type, default, what each does), its columns (type, what each holds,
        with its unit) and the order of its rows."""
        from nsyswrap.engine.queries import get

        return header(get(name))

    def run_query(
        self,
        run: RunPath,
        name: str,
        params: dict[str, Value] | None = None,
        limit: int = ROWS,
        offset: int = 0,
    ) -> dict:
        """Run a prebuilt query (`nsyswrap query NAME RUN -p NAME=VALUE`) with its
        parameters: `columns` as its header describes them (describe_query), its rows (as
        `nsyswrap query --format json`) from `offset`, at most `limit`, and `rows_total`."""
        from nsyswrap import api
        from nsyswrap.engine.queries import get
        from nsyswrap.output import to_json_records

        module = get(name)
        check_page(limit, offset)
        rows = to_json_records(api.query(name, inputs(run), opener=self.opener, **params or {}))
        return {
            "query": name,
            "columns": header(module)["columns"],
            **paged(rows, limit, offset),
        }

    def list_views(self) -> dict:
        """The normalized views that run_sql reads (`nsyswrap views`): each column with its
        type and what it holds (times are integer ns on the report's own clock)."""
        from nsyswrap import api

        return {"columns": api.views_table().to_dict(orient="records")}

    def run_sql(
        self,
        run: RunPath,
        sql: str,
        params: dict[str, Value] | None = None,
        limit: int = ROWS,
        offset: int = 0,
    ) -> dict:
        """Ad-hoc read-only SQL over the normalized views (list_views) of a run, as
        `nsyswrap sql` runs it: one statement that only reads (DuckDB's parser decides;
        nothing is written, attached, installed or loaded), `$name` for each of `params`;
        its rows from `offset`, at most `limit`, and `rows_total`. Prefer the report's
        tables and the prebuilt queries: overlap, exposed communication and waits need
        the cross-rank alignment they carry, not raw SQL."""
        from nsyswrap import api
        from nsyswrap.output import to_json_records

        check_page(limit, offset)
        total, rows = api.sql_page(
            sql, inputs(run), offset, limit, opener=self.opener, **params or {}
        )
        return page_of(to_json_records(rows), offset, total)

    def diff(
        self,
        base: RunPath,
        new: RunPath,
        steps: str | None = None,
        window_nvtx: str | None = None,
        step_pattern: str = "step:%",
        force: bool = False,
        limit: int = ROWS,
        offset: int = 0,
    ) -> dict:
        """Did the change help? Run NEW against run BASE, as `nsyswrap diff --format json`:
        headline, warnings, method, notes, checks (comparability), figures (each with base,
        new, change and its interval, significance) and stragglers; each list from `offset`,
        at most `limit`, with its total in `rows_total`."""
        from nsyswrap.comparison import diff
        from nsyswrap.comparison.render import as_json
        from nsyswrap.report import ReportOptions

        check_page(limit, offset)
        options = ReportOptions.parse(steps, window_nvtx, step_pattern)
        key = (repr(base), repr(new), options, force, self._diff_key(base, new, options))
        with self._lock:
            found = self._diffs.get(key) if key[-1] is not None else None
        if found is None:
            found = as_json(diff(base, new, options, force=force, opener=self.opener))
            with self._lock:
                if key[-1] is not None:
                    self._diffs[key] = found
                while len(self._diffs) > DIFFS_KEPT:
                    self._diffs.pop(next(iter(self._diffs)))
        totals, out = {}, dict(found)
        for name, value in found.items():
            if isinstance(value, list) and value and isinstance(value[0], dict):
                page = paged(value, limit, offset)
                out[name], totals[name] = page["rows"], page["rows_total"]
        return {**out, "offset": offset, "rows_total": totals}

    def check_claims(
        self,
        run: RunPath,
        text: str,
        steps: str | None = None,
        window_nvtx: str | None = None,
        step_pattern: str = "step:%",
    ) -> dict:
        """Check a text before answering with it: every number with a unit, rank, step and
        phase it states is looked up in the report's tables (as `nsyswrap check-claims`);
        each claim says whether a table holds it, and which table and row. Say only what
        is held; docs/mcp.md says what it can and cannot verify."""
        from nsyswrap.agent.claims import check

        return check(self.report(run, steps, window_nvtx, step_pattern), text)

    def report(
        self, run: RunPath, steps: str | None, window_nvtx: str | None, step_pattern: str
    ) -> dict:
        """The report dict of `run`, as `nsyswrap report --format json` prints it."""
        from nsyswrap.report import ReportOptions, report_of

        options = ReportOptions.parse(steps, window_nvtx, step_pattern)
        return report_of(inputs(run), options, opener=self.opener)

    def _rows_where(self, run, table_id, given, limit, offset, *window) -> dict:
        """The rows of a report table whose columns equal the values `given` (None: any)."""
        check_page(limit, offset)
        report = self.report(run, *window)
        found = part(report, table_id)
        if found is None or found[1] is None:
            said = "; ".join(
                f"{c['what']}: {c['reason']}"
                for s in report["sections"]
                for c in s.get("cannot_answer", [])
            )
            raise NsysWrapError(
                table_id, "is no table of this run's report", said or "see report_diagnosis"
            )
        section, table = found
        wanted = {k: v for k, v in given.items() if v is not None}
        columns = [c["name"] for c in columns_of(table["rows"])]
        missing = [k for k in wanted if k not in columns]
        if missing and table["rows"]:
            raise NsysWrapError(
                table_id,
                f"has no column {', '.join(missing)}",
                f"its columns are {', '.join(columns)}",
            )
        rows = [r for r in table["rows"] if all(_equal(r.get(k), v) for k, v in wanted.items())]
        out = {"section": section["id"], **paged_table({**table, "rows": rows}, limit, offset)}
        if not rows:
            out["note"] = f"no row of {table_id} has " + ", ".join(
                f"{k}={v}" for k, v in wanted.items()
            )
        return out

    def _diff_key(self, base, new, options) -> tuple | None:
        """What a diff's answer depends on: each run's stored-answer entry (its reports'
        versions, nsyswrap's code, the options); None when a report cannot be read."""
        from nsyswrap.comparison.samples import run_inputs
        from nsyswrap.report.answers import answer_entry
        from nsyswrap.storage.reports import expand

        entries = []
        for run in (base, new):
            try:
                paths = expand(run_inputs(run))
            except NsysWrapError:
                return None
            entry = answer_entry(
                paths, options, self.opener.rank_pattern, self.opener.allow_unrelated
            )
            entries.append(entry)
        return None if None in entries else tuple(entries)


def description(tools: Tools, name: str) -> str:
    """A tool's description: its docstring, the report's JSON layout where it returns
    report tables, the header of the SQL module behind its rows, and its arguments."""
    from nsyswrap.engine import sql_objects

    method = getattr(tools, name)
    text = [inspect.cleandoc(method.__doc__)]
    if name.startswith("report") or name in ("whatif", "critical_path"):
        text.append(REPORT_JSON)
    if name in ("whatif", "critical_path"):
        text.append(
            f"Its rows, as the query crossrank.{name} describes them (the report names a "
            "column for what it holds, e.g. `time` for `ns`, and gives it as a figure):"
        )
        text.append(header_text(sql_objects.get(f"crossrank.{name}")))
    params = inspect.signature(method).parameters
    text.append("Arguments: " + "; ".join(f"{p}: {ARGUMENTS.get(p, p)}" for p in params) + ".")
    return "\n\n".join(text)


def header(module) -> dict:
    """A SQL module's header as JSON: what one row is, scope, reads, params, columns, order."""
    return {
        "name": module.name,
        "row": module.summary,
        "scope": module.scope,
        "reads": list(module.reads),
        "params": [
            {"name": p.name, "type": p.type, "default": p.default, "doc": p.doc}
            for p in module.params
        ],
        "columns": [{"name": c.name, "type": c.type, "doc": c.doc} for c in module.columns],
        "order": [f"{c} DESC" if desc else c for c, desc in module.order],
    }


def header_text(module) -> str:
    """A SQL module's header in words: what one row is, then each column."""
    columns = "\n".join(f"- {c.name} ({c.type}): {c.doc}" for c in module.columns)
    return f"{module.summary}\nColumns:\n{columns}"


def inputs(run: RunPath) -> list[str]:
    """The report inputs of a `run` argument (one path or a list of them)."""
    items = [run] if isinstance(run, str) else list(run)
    if not items or not all(isinstance(i, str) and i for i in items):
        raise NsysWrapError("run", "names no report", "give a run directory or report paths")
    return items


def check_page(limit: int, offset: int) -> None:
    """Refuse a page of no rows, of more than MAX_ROWS, or from before the first row."""
    if not 1 <= limit <= MAX_ROWS or offset < 0:
        raise NsysWrapError(
            f"limit={limit}, offset={offset}",
            f"is no page of rows (limit 1 to {MAX_ROWS}, offset 0 or more)",
            f"ask for at most {MAX_ROWS} rows at a time and page with offset",
        )


def paged(rows: list, limit: int, offset: int) -> dict:
    """`rows` from `offset`, at most `limit` (see page_of)."""
    check_page(limit, offset)
    return page_of(rows[offset : offset + limit], offset, len(rows))


def page_of(page: list, offset: int, total: int) -> dict:
    """The rows of a page from `offset`, with `rows_total` and, when some are left out, a
    `more` line saying how to get them."""
    out = {"rows": page, "offset": offset, "rows_total": total}
    if offset + len(page) < total:
        out["more"] = (
            f"rows {offset} to {offset + len(page) - 1} of {total}; "
            f"ask again with offset={offset + len(page)} for the next"
        )
    return out


def paged_table(table: dict, limit: int, offset: int) -> dict:
    """A report table with its rows paged (see paged) and its `columns`."""
    return {**table, "columns": columns_of(table["rows"]), **paged(table["rows"], limit, offset)}


def columns_of(rows: list[dict]) -> list[dict]:
    """The columns of a table's rows in order, each with the unit of its figures (several,
    comma-separated, where they differ; None: plain values)."""
    units: dict[str, list] = {}
    for row in rows:
        for key, cell in row.items():
            seen = units.setdefault(key, [])
            if is_figure(cell) and cell["unit"] not in seen:
                seen.append(cell["unit"])
    return [{"name": k, "unit": ", ".join(u) or None} for k, u in units.items()]


def _equal(cell, wanted) -> bool:
    """A table cell (plain or figure) equals the value asked for (numbers by value, else
    as text)."""
    value = cell["value"] if is_figure(cell) else cell
    if isinstance(value, bool) or isinstance(wanted, bool):
        return value == wanted
    if isinstance(value, (int, float)) and isinstance(wanted, (int, float)):
        return value == wanted
    return value is not None and str(value) == str(wanted)
