"""Wiring: the serve settings and the assembly of a running simulator from them.

- ``settings``: ``ServeSettings``, every setting of ``aw-mcp serve``, made of the sections
  its parts define;
- ``assemble``: domains, engine, adapters, faults and episodes built from the settings.
"""
