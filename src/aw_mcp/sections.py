"""Settings sections: each configurable part of aw-mcp states its own settings, once.

A part (the HTTP server, an engine, the simulation) defines a ``Section``: a pydantic model
whose every field is a setting, with a ``description`` and the ``--help`` group it shows in
(``flag``). ``ServeSettings`` (``aw_mcp.wiring.settings``) is the union of the sections, so a
field's name is its flag (``n_ctx`` -> ``--n-ctx``) and its environment variable
(``AW_MCP_N_CTX``), and the part receives its section as it was set, field names unchanged.

What a part can be tuned with but a user never sets (a batch size, a backoff) is not a
setting: the part's own options model adds it to its section (``LlamaCppOptions`` is
``LlamaCppSettings`` plus such fields), so a section only ever holds flags.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict
from pydantic.config import JsonDict

# The --help sections, in the order ``aw-mcp serve --help`` and README's table list them.
WHAT = "what to simulate"
TRANSPORT = "transport"
ENGINE = "engine"
TRANSFORMERS = "transformers engine (pip install 'aw-mcp[transformers]')"
OPENAI = "OpenAI-compatible engine (vLLM, SGLang, llama.cpp server, ...)"
EPISODES = "episodes and records"
GROUPS = (WHAT, TRANSPORT, ENGINE, TRANSFORMERS, OPENAI, EPISODES)

SectionT = TypeVar("SectionT", bound="Section")


def flag(group: str, metavar: str | None = None) -> JsonDict:
    """How a field shows as a flag: its --help section and, optionally, its metavar."""
    return {"group": group, "metavar": metavar} if metavar else {"group": group}


class Section(BaseModel):
    """A part's settings. ``of(settings)`` takes them from any object that has them (the
    serve settings, or another section): the same names, nothing renamed."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    @classmethod
    def of(cls: type[SectionT], settings: Any, **overrides: Any) -> SectionT:
        """This section (or options model) with the values ``settings`` has for its fields,
        and ``overrides`` on top; fields ``settings`` lacks keep their defaults."""
        values = {
            name: getattr(settings, name)
            for name in cls.model_fields
            if name not in overrides and hasattr(settings, name)
        }
        return cls.model_validate({**values, **overrides})
