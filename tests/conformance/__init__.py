"""The official MCP conformance suite against trio-mcp's server and client (see README.md)."""
