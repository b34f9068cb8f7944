"""LoRA adapters: the ones bundled with the package (pinned), and what an adapter file says.

``aw-mcp train`` writes GGUF LoRA adapters that llama.cpp loads on top of a base GGUF. Besides
llama.cpp's own keys (``general.type = adapter``, ``adapter.type = lora``,
``adapter.lora.alpha``) an adapter records how it was trained, so serving can match it:

- ``aw_mcp.profile``: the prompt profile its training sequences were rendered with (a model
  trained on one prompt layout does worse on another);
- ``aw_mcp.base_model``: the base GGUF's file name (an adapter fits one base model only);
- ``aw_mcp.domains``: the domains of its training episodes, comma-separated.

A bundled adapter (``adapters/`` at the repository root, ``aw_mcp/data/adapters`` in a
wheel) is used by default with the model it was made for when every served domain is one it
was trained on (of several such, the one trained on the fewest domains); ``--lora FILE``
replaces it, ``--no-lora`` turns all off. Like the models, bundled adapters are opaque bytes:
each is pinned below by size and sha256 and verified before it is read or served; a file in
the folder that is not pinned is not served.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from aw_mcp.errors import UserInputError
from aw_mcp.files.bundled import bundled_dir
from aw_mcp.models.fetch import verify_pinned

log = logging.getLogger(__name__)

PROFILE_KEY = "aw_mcp.profile"
BASE_MODEL_KEY = "aw_mcp.base_model"
DOMAINS_KEY = "aw_mcp.domains"
REINSTALL = "reinstall aw-mcp"


class AdapterError(UserInputError):
    """An adapter file is missing or is not a GGUF LoRA adapter."""


class BundledAdapter(BaseModel):
    """One adapter shipped in ``adapters/``: its file and its pinned bytes."""

    model_config = ConfigDict(frozen=True)

    file_name: str
    size: int = Field(gt=0)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


# What each one is for and how it was made: adapters/README.md and the lab notes it links.
BUNDLED_ADAPTERS: tuple[BundledAdapter, ...] = (
    BundledAdapter(
        file_name="qwen2.5-coder-0.5b.gguf",  # terminal, os and swe (the default's)
        size=17_619_648,
        sha256="bcba886459d282ec0db7fc6afa9e46463ad8cbc14f9f48fb03ea2253a1d99675",
    ),
    BundledAdapter(
        file_name="qwen2.5-coder-0.5b-swe.gguf",  # swe alone
        size=17_619_552,
        sha256="3b50cfb52107e7d817c0726fc3b883cba46b3e5999e8b317393f35f36aa6b8a3",
    ),
    BundledAdapter(
        file_name="qwen2.5-coder-0.5b-web.gguf",  # web alone
        size=17_619_552,
        sha256="3762e979494344eea55605c2ef1544793a6c1d81b5346aa668754a76b8704f41",
    ),
    BundledAdapter(
        file_name="qwen2.5-coder-0.5b-mirrors.gguf",  # every mirrored server (--tools-from)
        size=17_619_648,
        sha256="3ae6ec84d4551019e15099e747d2a10a77246af43168d9379a3d3525dc457996",
    ),
    BundledAdapter(
        file_name="smollm2-135m-terminal.gguf",  # the small model's, terminal
        size=9_797_856,
        sha256="447ca75458c23425a21951d11750197c04d496e9c9013c0fcc0a72a7ea027e12",
    ),
)


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
    """The pinned adapters shipped with the package, each verified (none when the folder is
    absent). A wrong file raises ModelFileError naming the file and the hash it should have."""
    try:
        folder = bundled_dir("adapters")
    except FileNotFoundError:
        return []
    pins = {pin.file_name: pin for pin in BUNDLED_ADAPTERS}
    paths = []
    for path in sorted(folder.glob("*.gguf")):
        pin = pins.get(path.name)
        if pin is None:
            log.warning("%s is not a pinned bundled adapter (models/adapters.py): not served", path)
            continue
        verify_pinned(path, pin.size, pin.sha256, f"the bundled adapter {pin.file_name}", REINSTALL)
        paths.append(path)
    return paths


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
            log.debug(
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
