"""Shell tools: tools a source answers by running a command line in the episode's real bash.

A world such as ``swe`` serves, beside its real MCP servers, tools that no MCP server has
(``run_command``, ``run_tests``). A source declares them as data, a :class:`ShellTool` each:
how the call's arguments become one bash command line. The runner (generate_mcp.py) runs
that line in a bash in the episode's sandbox, as the source's user, and records what bash
printed as the Terminal world's observation (:func:`~sandbox.observation_text`: the output,
then ``[exit code: N]``), so a failing command or test run is a successful tool call.
"""

from __future__ import annotations

import shlex
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator


class ShellTool(BaseModel):
    """One tool answered by bash. Either ``line``: the argument that IS the command line,
    run as typed at a prompt (``run_command``); or ``program`` (words of a fixed command)
    followed by the arguments named in ``words``, in that order, each shell-quoted (a list
    argument gives one word per item; an absent one gives nothing). ``cwd``: run the line in
    a subshell in this directory, so the shell's own working directory (which ``cd`` in
    ``run_command`` moves) does not matter and does not change."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    line: str | None = None
    program: tuple[str, ...] = ()
    words: tuple[str, ...] = ()
    cwd: str | None = None

    @model_validator(mode="after")
    def _one_way(self) -> ShellTool:
        if (self.line is None) == (not self.program):
            raise ValueError(f"shell tool {self.name}: give either line or program")
        if self.line is not None and self.words:
            raise ValueError(f"shell tool {self.name}: words go with program, not line")
        return self

    @property
    def arguments(self) -> tuple[str, ...]:
        return (self.line,) if self.line is not None else self.words

    def command_line(self, arguments: dict[str, Any]) -> str:
        """The bash command line for a call with ``arguments``. An argument the tool does not
        take, or of the wrong type, is a ValueError (the scripts are wrong, not the world)."""
        if unknown := sorted(set(arguments) - set(self.arguments)):
            raise ValueError(f"{self.name} takes no argument {', '.join(unknown)}")
        if self.line is not None:
            text = arguments.get(self.line)
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f"{self.name} needs {self.line}: a command line")
            line = text
        else:
            words = list(self.program)
            for name in self.words:
                value = arguments.get(name)
                if isinstance(value, list) and all(isinstance(v, str) for v in value):
                    words += value
                elif isinstance(value, str):
                    words.append(value)
                elif value is not None:
                    raise ValueError(f"{self.name}: {name} must be a string or strings")
            line = shlex.join(words)
        return f"(cd {shlex.quote(self.cwd)} && {line})" if self.cwd else line


# The Terminal world's tool, wire-identical in every world that has it.
RUN_COMMAND = ShellTool(name="run_command", line="command")
