"""Domains: the data files that define a simulated world (tools, instructions, initial world)."""

from aw_mcp.domain.loader import bundled_domain_names, load_domain, load_world
from aw_mcp.domain.models import Demonstration, DomainSpec, ToolCall, ToolSpec, WorldSpec

__all__ = [
    "Demonstration",
    "DomainSpec",
    "ToolCall",
    "ToolSpec",
    "WorldSpec",
    "bundled_domain_names",
    "load_domain",
    "load_world",
]
