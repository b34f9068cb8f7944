"""The errors aw-mcp raises on purpose: one tree, so whoever catches one knows whose it is.

::

    AwMcpError            something aw-mcp could not do, said in one sentence
    ├── UserInputError    a flag, file or piece of data the user gave is wrong: the command
    │                     line prints the message alone and exits 2
    └── EngineError       the world model failed (could not load, died, refused): an agent
                          gets the message as an ``isError`` result, never a crash

A subclass says more (``DataFileError`` names file, line and field). Anything else that
escapes is a bug: the command line lets it through with its traceback, and the server
reports it as an internal error of that one call.
"""

from __future__ import annotations


class AwMcpError(Exception):
    """Something aw-mcp could not do; the message says what, for a person to read."""


class UserInputError(AwMcpError, ValueError):
    """A flag, file or piece of data given by the user is wrong (exit status 2).

    Also a ``ValueError``: it is one, and callers that guard a parse with ``ValueError``
    keep working."""


class EngineError(AwMcpError, RuntimeError):
    """The world model's backend failed (could not load, died, refused). The message is
    shown to the agent."""
