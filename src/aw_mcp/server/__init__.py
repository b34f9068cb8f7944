"""The MCP surface: tool listing, argument validation, the error contract and transports.

- ``app``: tools/list and tools/call on the low-level MCP server, and the error contract;
- ``arguments``: arguments checked against the tool's inputSchema before anything runs;
- ``episode_identity``: which episode a request belongs to (header, ``_meta``, session);
- ``world_surface``: resources, prompts and completions; ``listen``: subscriptions;
- ``client_requests``, ``client_logging``: what a tool asks of, and tells, the client;
- ``transports``, ``http_app``, ``http_watch``, ``malformed``: stdio and Streamable HTTP,
  hardened; ``ui``: the live page of ``serve --ui``.
"""
