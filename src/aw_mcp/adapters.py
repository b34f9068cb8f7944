"""LoRA adapters for the embedded model: the bundled one, and what an adapter file says.

``aw-mcp train`` writes GGUF LoRA adapters that llama.cpp loads on top of a base GGUF. Besides
llama.cpp's own keys (``general.type = adapter``, ``adapter.type = lora``,
``adapter.lora.alpha``) an adapter records how it was trained, so serving can match it:

- ``aw_mcp.profile``: the prompt profile its training sequences were rendered with (a model
  trained on one prompt layout does worse on another);
- ``aw_mcp.base_model``: the base GGUF's file name (an adapter fits one base model only);
- ``aw_mcp.domains``: the domains of its training episodes, comma-separated.

A bundled adapter (``adapters/`` at the repository root, ``aw_mcp/data/adapters`` in a
wheel) is used by default with the embedded model when every served domain is one it was
trained on (of several such, the one trained on the fewest domains); ``--lora FILE`` replaces
it, ``--no-lora`` turns all off.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from aw_mcp.data_files import bundled_dir

log = logging.getLogger(__name__)

PROFILE_KEY = "aw_mcp.profile"
BASE_MODEL_KEY = "aw_mcp.base_model"
DOMAINS_KEY = "aw_mcp.domains"


class AdapterError(ValueError):
    """An adapter file is missing or is not a GGUF LoRA adapter."""


@dataclass(frozen=True)
class AdapterInfo:
    path: Path
    alpha: float
    profile: str | None = None
    base_model: str | None = None
    domains: tuple[str, ...] = field(default_factory=tuple)


def read_adapter_info(path: Path) -> AdapterInfo:
    """The metadata of a GGUF LoRA adapter (header only; the tensors are not read)."""
    from gguf import GGUFReader

    if not path.is_file():
        raise AdapterError(f"LoRA adapter not found: {path}")
    try:
        fields = GGUFReader(path).fields
    except Exception as exc:  # the reader raises ValueError/struct errors on a bad file
        raise AdapterError(f"{path} is not a GGUF file: {exc}") from exc

    def value(key: str):
        found = fields.get(key)
        return None if found is None else found.contents()

    if value("general.type") != "adapter" or value("adapter.type") != "lora":
        raise AdapterError(f"{path} is a GGUF file but not a LoRA adapter")
    domains = value(DOMAINS_KEY)
    return AdapterInfo(
        path=path,
        alpha=float(value("adapter.lora.alpha") or 0.0),
        profile=value(PROFILE_KEY),
        base_model=value(BASE_MODEL_KEY),
        domains=tuple(d for d in (domains or "").split(",") if d),
    )


def bundled_adapters() -> list[Path]:
    """The adapters shipped with the package (none when the folder is absent)."""
    try:
        folder = bundled_dir("adapters")
    except FileNotFoundError:
        return []
    return sorted(folder.glob("*.gguf"))


def default_adapters(base_model: str, domains: list[str]) -> list[AdapterInfo]:
    """The bundled adapter made for the base GGUF of this file name and trained on every
    served domain; where several are, the most specific one (fewest domains: a domain's own
    adapter wins over a shared one). Adapters that name no domains fit any and come last."""
    fitting = []
    for path in bundled_adapters():
        info = read_adapter_info(path)
        if info.base_model and info.base_model != base_model:
            continue
        if info.domains and not set(domains) <= set(info.domains):
            log.info(
                "bundled adapter %s not used: trained on %s, serving %s",
                path.name,
                ",".join(info.domains),
                ",".join(domains),
            )
            continue
        fitting.append(info)
    if not fitting:
        return []
    # Adapters are alternatives, never stacked: each was trained alone on the base.
    most_specific = min(fitting, key=lambda info: len(info.domains) or float("inf"))
    return [most_specific]


def adapters_profile(adapters: list[AdapterInfo]) -> str | None:
    """The prompt profile the adapters were trained with; they must agree."""
    profiles = {a.profile for a in adapters if a.profile}
    if len(profiles) > 1:
        raise AdapterError(
            "the LoRA adapters were trained with different prompt profiles "
            f"({', '.join(sorted(profiles))}); give --profile or fewer adapters"
        )
    return next(iter(profiles), None)
