"""Real MCP servers, talked to as a client: what they offer and what they answer.

- ``tools_list``: save a server's ``tools/list`` (and resources, prompts): ``aw-mcp capture``;
- ``target``: the ``--url URL`` / ``-- COMMAND`` flags that name the real server;
- ``record_proxy``: a transparent proxy that records every call: ``aw-mcp record``;
- ``text_hints``: how a server writes its structured answers as text, learned from records.
"""
