"""Look at record directories: an HTML report of episodes (``aw-mcp view``, ``serve --ui``)
and what agents did after injected faults (``aw-mcp report``)."""
