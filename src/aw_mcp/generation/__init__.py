"""Real trajectories: scripted episodes run against real tools in throwaway sandboxes
(``aw-mcp generate NAME``), recorded in the ``--record-dir`` format.

- ``sources/``: one module per real source (bash, each MCP server, Playwright), ``SOURCE``;
- ``terminal``, ``mcp_servers``: the two runners the sources share;
- ``sandbox``: a throwaway real bash as an unprivileged user in its own namespaces;
- ``worlds``: the varied machines terminal episodes run in; ``world_faults``: real conditions;
- ``terminal_scripts``, ``shell_tools``: the episodes' commands and shell-backed tools.
"""
