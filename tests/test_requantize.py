"""--requantize: the embedded GGUF converted once by llama.cpp's quantizer, then served."""

from __future__ import annotations

import anyio
import pytest

from aw_mcp.engines.base import ChatMessage, GenerationRequest
from aw_mcp.errors import EngineError
from aw_mcp.models.requantize import requantized
from aw_mcp.testing import small_model_path
from aw_mcp.wiring.assemble import make_engine
from aw_mcp.wiring.settings import ServeSettings
from tests.conftest import REPO_ROOT, small_engine

Q8_0 = 7  # llama.cpp's LLAMA_FTYPE_MOSTLY_Q8_0, as written in general.file_type


def _file_type(path) -> int:
    from gguf import GGUFReader

    field = GGUFReader(path).fields["general.file_type"]
    return int(field.parts[field.data[0]][0])


@pytest.mark.slow
def test_the_model_is_converted_once_and_reused(tmp_path, capfd):
    source = small_model_path()
    assert _file_type(source) != Q8_0  # the embedded file is Q4_1
    converted = requantized(source, "q8_0", tmp_path)
    assert "converting to q8_0" not in capfd.readouterr().err  # not a line per tensor
    assert _file_type(converted) == Q8_0 and converted.parent == tmp_path
    assert [p.name for p in tmp_path.iterdir()] == [converted.name]  # no partial file left
    made = converted.stat().st_mtime_ns
    assert requantized(source, "q8_0", tmp_path) == converted
    assert converted.stat().st_mtime_ns == made  # found in the cache, not written again


def test_an_engine_serves_the_converted_model_with_the_bundled_adapter(tmp_path):
    adapter = REPO_ROOT / "adapters" / "smollm2-135m-terminal.gguf"
    engine = small_engine(requantize="q8_0", requantize_folder=tmp_path, lora=[adapter])
    request = GenerationRequest(
        messages=[ChatMessage(role="user", content="Say hello.")], max_tokens=8
    )

    async def answer() -> str:
        try:
            return (await engine.generate(request)).text
        finally:
            await engine.aclose()

    assert anyio.run(answer).strip()
    assert len(list(tmp_path.glob("*.q8_0-*.gguf"))) == 1


def test_unknown_types_and_other_engines_are_refused(tmp_path):
    with pytest.raises(EngineError, match="q8_0"):
        requantized(small_model_path(), "q2_k", tmp_path)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="llama-cpp engine only"):
        make_engine(ServeSettings(engine="openai", requantize="q8_0"))
    with pytest.raises(ValueError):
        ServeSettings(requantize="q3")  # type: ignore[arg-type]
