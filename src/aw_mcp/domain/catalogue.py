"""The tools one server offers: the union of its loaded domains.

Name rule when several domains are served together: a tool keeps its own name when no other
loaded domain has a tool of that name; when two or more do, each of those tools is served as
``<domain>_<name>`` (e.g. ``terminal_read_file`` and ``os_read_file``), so no tool is hidden
and every name stays a plain identifier that all clients accept.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from aw_mcp.domain.models import DomainSpec, ToolSpec, WorldSpec
from aw_mcp.errors import UserInputError


@dataclass(frozen=True)
class ServedTool:
    public_name: str  # the name on the wire
    spec: ToolSpec  # the domain's own definition (its own name)
    domain: DomainSpec
    world: WorldSpec  # the domain's world with the user's --world facts layered on


class Catalogue:
    def __init__(self, domains: list[DomainSpec], extra_world: WorldSpec | None = None):
        if not domains:
            raise UserInputError("at least one domain is needed")
        names = [d.name for d in domains]
        if len(set(names)) != len(names):
            raise UserInputError(f"a domain is loaded twice: {names}")
        self.domains = domains
        counts = Counter(t.name for d in domains for t in d.tools)
        self._tools: dict[str, ServedTool] = {}
        for domain in domains:
            world = domain.world.merged(extra_world) if extra_world else domain.world
            for tool in domain.tools:
                public = tool.name if counts[tool.name] == 1 else f"{domain.name}_{tool.name}"
                if public in self._tools:
                    raise UserInputError(f"two tools would both be served as {public!r}")
                self._tools[public] = ServedTool(public, tool, domain, world)

    def __iter__(self):
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def get(self, public_name: str) -> ServedTool | None:
        return self._tools.get(public_name)

    def __getitem__(self, public_name: str) -> ServedTool:
        """A tool that must be served (scripts and benchmarks; the server uses ``get``)."""
        if public_name not in self._tools:
            raise KeyError(f"no tool {public_name!r} is served; served: {', '.join(self._tools)}")
        return self._tools[public_name]

    def names(self) -> list[str]:
        return list(self._tools)
