"""Domains: what a simulated world is, as data (``simulators/*.yaml``, captures of real servers).

- ``models``: the pydantic models of a domain file (tools, simulation hints, world, generation);
- ``loader``: bundled domains by name, a user's domain or world file by path;
- ``mirror``: a captured ``tools/list`` served as a domain (``--tools-from``);
- ``catalogue``: the tools one server offers, the union of its loaded domains;
- ``answers``: what a simulated tool returns, before it becomes an MCP result.
"""
