"""aw-mcp: an MCP server whose tools are answered by a local language world model."""

__version__ = "0.1.0"
