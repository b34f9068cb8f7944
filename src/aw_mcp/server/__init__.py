"""The MCP surface: tool listing, argument validation, the error contract and transports."""

from aw_mcp.server.app import build_server
from aw_mcp.server.episode_identity import EPISODE_HEADER, EPISODE_META_KEY

__all__ = ["EPISODE_HEADER", "EPISODE_META_KEY", "build_server"]
