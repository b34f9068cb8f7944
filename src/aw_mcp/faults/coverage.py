"""Does a scenario fit the tools it is meant for? (``aw-mcp faults check --against``, start-up)

A rule whose argument conditions name an argument a matched tool does not have never fires on
that tool: ``path`` on ``move_file(source, destination)`` silently lets every move through.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from aw_mcp.domain.catalogue import Catalogue
from aw_mcp.faults.scenario import Scenario


@dataclass(frozen=True)
class ToolArguments:
    domain: str
    tool: str  # the name as served
    arguments: frozenset[str]  # the inputSchema's properties


def served_tool_arguments(catalogue: Catalogue) -> list[ToolArguments]:
    return [
        ToolArguments(
            t.domain.name, t.public_name, frozenset(t.spec.input_schema.get("properties", {}))
        )
        for t in catalogue
    ]


def argument_gaps(scenarios: Sequence[Scenario], tools: Iterable[ToolArguments]) -> list[str]:
    """One line per (rule, matched tool) whose argument conditions name arguments it lacks."""
    tools = list(tools)
    gaps = []
    for scenario in scenarios:
        for rule in scenario.rules:
            # `present: false` holds for an absent argument: only the other conditions need it.
            needed = {n for n, c in rule.match.arguments.items() if c.present is not False}
            for tool in tools:
                missing = needed - tool.arguments
                if missing and rule.match.covers_tool(tool.domain, tool.tool):
                    has = ", ".join(sorted(tool.arguments)) or "none"
                    gaps.append(
                        f"{scenario.name}/{rule.id}: {tool.domain} tool {tool.tool} has no "
                        f"argument {', '.join(sorted(missing))} (it has: {has}); the rule "
                        "never fires on it"
                    )
    return gaps
