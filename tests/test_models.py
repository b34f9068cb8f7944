"""The model catalogue: known files are fetched, assembled and verified before they are served.

Assembly and refusals run on small fake chunk packages made here (real packages on sys.path,
found by the import system as the real parts are); the pinned real files are verified too:
the embedded SmolLM2 always, Qwen2.5-Coder-0.5B (the default world model) from its six
installed parts.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

from aw_mcp.models.catalogue import (
    DEFAULT_MODEL,
    KNOWN_MODELS,
    ChunkedPackages,
    KnownModel,
    ModelFileError,
)
from aw_mcp.models.fetch import model_file, resolve_model, verify

PARTS = [b"GGUF" + bytes(range(256)) * 40, b"second part" * 300, b"the end"]


def fake_model(tmp_path: Path, parts: list[bytes], name: str = "fake") -> KnownModel:
    """A catalogue entry whose parts are packages ``<name>_partN`` with ``data/partNN.bin``,
    installed under tmp_path and put on sys.path."""
    site = tmp_path / "site"
    for number, data in enumerate(parts, 1):
        package = site / f"{name}_part{number}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "data" / f"part{number:02d}.bin").write_bytes(data)
    sys.path.insert(0, str(site))
    whole = b"".join(parts)
    return KnownModel(
        name=name,
        title="a fake model",
        license="Apache-2.0",
        file_name=f"{name}.gguf",
        size=len(whole),
        sha256=hashlib.sha256(whole).hexdigest(),
        hf_repo="nobody/nothing",
        packages=ChunkedPackages(
            modules=tuple(f"{name}_part{i}" for i in range(1, len(parts) + 1)),
            distributions=tuple(f"{name}-part{i}==1.0" for i in range(1, len(parts) + 1)),
            part_sha256=tuple(hashlib.sha256(p).hexdigest() for p in parts),
        ),
    )


@pytest.fixture(autouse=True)
def clean_sys_path():
    saved = list(sys.path)
    yield
    sys.path[:] = saved
    for name in [m for m in sys.modules if m.startswith(("fake", "partly", "broken"))]:
        del sys.modules[name]


def test_packaged_parts_are_joined_once_into_the_cache_and_verified(tmp_path):
    model = fake_model(tmp_path, PARTS)
    cache = tmp_path / "cache"
    path = model_file(model, cache)
    assert path == cache / "fake.gguf" and path.read_bytes() == b"".join(PARTS)
    assert [p.name for p in cache.iterdir()] == ["fake.gguf"]  # no partial file left
    assert model_file(model, cache) == path  # the second time from the cache


def test_a_truncated_or_corrupted_cached_file_is_refused_naming_file_and_hash(tmp_path):
    model = fake_model(tmp_path, PARTS)
    cache = tmp_path / "cache"
    path = model_file(model, cache)
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(ModelFileError, match="truncated") as truncated:
        model_file(model, cache)
    assert str(path) in str(truncated.value) and model.sha256 in str(truncated.value)
    data = bytearray(b"".join(PARTS))
    data[100] ^= 0xFF  # same size, one byte changed
    path.write_bytes(bytes(data))
    with pytest.raises(ModelFileError, match="corrupted") as corrupted:
        model_file(model, cache)
    assert str(path) in str(corrupted.value) and model.sha256 in str(corrupted.value)


def test_a_wrong_part_is_named_and_nothing_is_left_in_the_cache(tmp_path):
    model = fake_model(tmp_path, PARTS, "broken")
    Path(sys.path[0], "broken_part2", "data", "part02.bin").write_bytes(b"not the bytes")
    cache = tmp_path / "cache"
    with pytest.raises(ModelFileError, match=r"part 2 of broken, broken-part2==1\.0"):
        model_file(model, cache)
    assert list(cache.iterdir()) == []


def test_missing_parts_name_the_packages_to_install(tmp_path):
    model = fake_model(tmp_path, PARTS, "partly")
    import shutil

    shutil.rmtree(Path(sys.path[0], "partly_part3"))
    with pytest.raises(
        ModelFileError,
        match=r"1 of the 3 packaged parts are missing; pip install partly-part3==1\.0",
    ):
        model_file(model, tmp_path / "cache")


def test_a_path_is_served_as_given_and_an_unknown_name_is_a_clear_error(tmp_path):
    own = tmp_path / "mine.gguf"
    own.write_bytes(b"GGUF")
    assert resolve_model(str(own)) == own
    unknown = r"model file not found: qwen-9000 \(and not a known model: qwen2\.5-coder-0\.5b"
    with pytest.raises(ModelFileError, match=unknown):
        resolve_model("qwen-9000")


def test_the_embedded_and_default_models_are_the_pinned_bytes():
    smol = resolve_model("smollm2-135m")
    assert smol.name == KNOWN_MODELS["smollm2-135m"].file_name
    verify(smol, KNOWN_MODELS["smollm2-135m"])
    assert DEFAULT_MODEL == "qwen2.5-coder-0.5b"
    qwen = resolve_model(DEFAULT_MODEL)  # from the installed parts (a core dependency)
    assert qwen.name == "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
    assert qwen.stat().st_size == KNOWN_MODELS[DEFAULT_MODEL].size
