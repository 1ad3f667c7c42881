"""Agent access: `nsyswrap mcp`, a Model Context Protocol server over the report
(nsyswrap.agent.server, its tools in nsyswrap.agent.tools), and `nsyswrap check-claims`,
which checks the numbers a text states against the report's tables (nsyswrap.agent.claims).

A thin shell over the library, like the command line: the tools return the report's own
JSON and the rows of the prebuilt queries and ad-hoc SQL, nothing computed here.
"""
