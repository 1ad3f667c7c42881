"""`nsyswrap mcp`: the tools of nsyswrap.agent.tools served over the Model Context Protocol
on stdio, with the `mcp` SDK (the optional extra `nsyswrap[mcp]`, imported only here).

Errors come back as the command line says them, one line `Error: ...`: bad input
(NsysWrapError), a limit of the machine (a full disk), and arguments that do not fit a
tool's schema. A bug in nsyswrap is logged with its traceback on stderr and the client is
told only that the tool failed. While the SDK serves, the process's stdout is stderr (the
protocol has its own copy of it), so nothing printed by nsyswrap or a worker reaches it.
"""

from __future__ import annotations

import functools
import json

from nsyswrap.agent.tools import Tools, description
from nsyswrap.engine.opener import Opener
from nsyswrap.errors import NsysWrapError, limit_error

INSTRUCTIONS = """\
nsyswrap answers where the step time of a multi-GPU training run goes, from Nsight \
Systems exports: the straggler, its phase, what each fix would save (a replay of the run \
without it), collective waits, idle gaps, the critical path. Name a run by its path (a run \
directory or report .sqlite files). Start with report_diagnosis; report_section gives any \
table it lists, whatif what a fix would save, critical_path a step's critical path, diff \
two runs. Every figure is {"value", "unit"} (ns; a fraction: 0.17 is 17 %); a null value \
carries its reason. Do not compute overlap, exposed communication or waits with raw SQL: \
the report's tables carry the cross-rank clock alignment. Before answering, pass your \
answer to check_claims and state only the numbers it marks held."""

INSTALL = "install it with pip install 'nsyswrap[mcp]'"


def serve(opener: Opener) -> None:
    """Serve the tools on stdio until the client closes the connection."""
    build(opener).run("stdio")


def build(opener: Opener):
    """The MCP server with every tool of `Tools(opener)`."""
    try:
        import pydantic
        from mcp.server.mcpserver import MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
        from mcp_types import CallToolResult, TextContent, ToolAnnotations
    except ImportError:
        raise NsysWrapError(
            "nsyswrap mcp", "needs the MCP Python SDK (mcp), which is not installed", INSTALL
        ) from None

    class Server(MCPServer):
        async def call_tool(self, name, arguments, context=None):
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as exc:
                line = _one_line(name, exc.__cause__, pydantic.ValidationError)
                if line is None:
                    raise
                return CallToolResult(content=[TextContent(type="text", text=line)], is_error=True)

    import nsyswrap

    server = Server(
        "nsyswrap", version=nsyswrap.__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )
    tools = Tools(opener)
    only_reads = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
    for name in Tools.NAMES:
        server.add_tool(
            _as_json(getattr(tools, name)),
            name=name,
            description=description(tools, name),
            annotations=only_reads,
            structured_output=False,
        )
    return server


def _as_json(method):
    """`method` answering with its result as JSON text."""

    @functools.wraps(method)
    def call(*args, **kwargs) -> str:
        return json.dumps(method(*args, **kwargs))

    return call


def _one_line(tool: str, cause: BaseException | None, invalid: type) -> str | None:
    """The one-line error of what a tool raised (None: a bug, said by the SDK)."""
    if isinstance(cause, NsysWrapError):
        return f"Error: {cause}"
    if isinstance(cause, invalid):  # arguments that do not fit the tool's schema
        wrong = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in cause.errors()
        )
        error = NsysWrapError(f"{tool}", f"arguments do not fit: {wrong}", "see its input schema")
        return f"Error: {error}"
    limit = limit_error(cause) if cause is not None else None
    return None if limit is None else f"Error: {limit}"
