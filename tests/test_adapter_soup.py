"""``aw-mcp adapters merge``: one adapter whose change is the weighted sum of several."""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import numpy as np
import pytest
from gguf import GGUFReader

from aw_mcp.cli import main
from aw_mcp.engines.base import ChatMessage, GenerationRequest
from aw_mcp.models.adapters import bundled_adapters, read_adapter_info
from aw_mcp.training.adapter_soup import (
    SoupPart,
    kept_energy,
    merge_adapters,
    parse_part,
    truncate,
)
from aw_mcp.training.gguf_adapter import AdapterMetadata, LoraWeights, write_gguf_adapter
from tests.conftest import small_engine

MODULE = "model.layers.0.self_attn.v_proj"  # no rotary row order to mind


def _adapter(path: Path, seed: int, alpha: float, rank: int, base: str = "base.gguf") -> Path:
    rng = np.random.default_rng(seed)
    weights = [LoraWeights(MODULE, rng.normal(size=(rank, 8)), rng.normal(size=(6, rank)))]
    meta = AdapterMetadata(alpha, "small", base, ["terminal"], 1, 2, 2)
    return write_gguf_adapter(path, weights, meta)


def _change(path: Path) -> np.ndarray:
    """B @ A * alpha / rank, as llama.cpp applies it."""
    tensors = {t.name: np.array(t.data, dtype=np.float32) for t in GGUFReader(path).tensors}
    (a_name,) = [n for n in tensors if n.endswith(".lora_a")]
    a, b = tensors[a_name], tensors[a_name.replace("lora_a", "lora_b")]
    return b @ a * read_adapter_info(path).alpha / a.shape[0]


def test_the_merged_change_is_the_weighted_sum_of_the_changes(tmp_path):
    one = _adapter(tmp_path / "one.gguf", seed=1, alpha=16, rank=4)
    two = _adapter(tmp_path / "two.gguf", seed=2, alpha=8, rank=2)
    merged = merge_adapters([SoupPart(one, 0.25), SoupPart(two, 0.75)], tmp_path / "m.gguf")
    expected = 0.25 * _change(one) + 0.75 * _change(two)
    assert np.allclose(_change(merged.path), expected, atol=1e-2)
    assert (merged.rank, merged.kept) == (6, 1.0)
    assert read_adapter_info(merged.path).domains == ("terminal",)


def test_adapters_of_other_bases_or_bad_weights_are_refused(tmp_path):
    one = _adapter(tmp_path / "one.gguf", seed=1, alpha=16, rank=4)
    other = _adapter(tmp_path / "other.gguf", seed=2, alpha=16, rank=4, base="other.gguf")
    with pytest.raises(ValueError, match=r"other\.gguf is for other\.gguf"):
        merge_adapters([SoupPart(one, 0.5), SoupPart(other, 0.5)], tmp_path / "m.gguf")
    with pytest.raises(ValueError, match="the weight is a number"):
        parse_part(f"{one}*half")
    assert parse_part(f"{one}*0.5") == SoupPart(one, 0.5)
    with pytest.raises(ValueError, match="one adapter or more"):
        merge_adapters([], tmp_path / "m.gguf")
    missing = tmp_path / "none.gguf"
    assert main(["adapters", "merge", str(missing), "--out", str(tmp_path / "m.gguf")]) == 2
    assert not (tmp_path / "m.gguf").exists()


def test_an_adapter_merged_with_itself_at_half_weights_answers_as_it_does(tmp_path):
    adapter = next(p for p in bundled_adapters() if p.name == "smollm2-135m-terminal.gguf")
    halves = tmp_path / "halves.gguf"
    doubled = tmp_path / "doubled.gguf"
    halves_cli = ["adapters", "merge", f"{adapter}*0.5", f"{adapter}*0.5", "--out", str(halves)]
    assert main(halves_cli) == 0
    merge_adapters([SoupPart(adapter, 1.0), SoupPart(adapter, 1.0)], doubled)
    request = GenerationRequest(
        messages=[ChatMessage(role="user", content='run_command {"command": "ls -la"}')],
        max_tokens=24,
    )

    async def answer(lora: Path) -> str:
        engine = small_engine(lora=[lora])
        try:
            return (await engine.generate(request)).text
        finally:
            await engine.aclose()

    alone, as_halves, as_double = (anyio.run(answer, p) for p in (adapter, halves, doubled))
    assert as_halves == alone  # the same change (to float16 rounding), the same greedy text
    assert as_double != alone  # twice the change is another model


def test_a_rank_cut_keeps_the_best_approximation_and_is_exact_when_the_rank_allows():
    rng = np.random.default_rng(5)
    down, up = rng.normal(size=(6, 10)), rng.normal(size=(7, 6))
    full = up @ down
    same_down, same_up = truncate(down, up, 6)
    assert np.allclose(same_up @ same_down, full)
    cut_down, cut_up = truncate(down, up, 3)
    assert cut_down.shape == (3, 10) and cut_up.shape == (7, 3)
    u, s, vt = np.linalg.svd(full)
    best = (u[:, :3] * s[:3]) @ vt[:3]  # Eckart-Young: the best rank-3 approximation
    assert np.allclose(cut_up @ cut_down, best, atol=1e-5)
    assert kept_energy(down, up, 3) == pytest.approx((s[:3] ** 2).sum() / (s**2).sum())


def test_the_cli_writes_the_rank_it_is_asked_for_and_says_what_it_keeps(tmp_path, capsys):
    one = _adapter(tmp_path / "one.gguf", seed=1, alpha=16, rank=4)
    two = _adapter(tmp_path / "two.gguf", seed=2, alpha=8, rank=4)
    out = tmp_path / "m.gguf"
    assert main(["adapters", "merge", str(one), str(two), "--rank", "4", "--out", str(out)]) == 0
    said = capsys.readouterr().out
    kept = float(re.search(r"keeps at least ([0-9.]+)%", said).group(1)) / 100
    assert "rank 4" in said and 0.3 < kept < 1.0  # two random rank-4 changes: much is lost
    (down,) = [t for t in GGUFReader(out).tensors if t.name.endswith(".lora_a")]
    assert np.array(down.data).shape[0] == 4
    assert read_adapter_info(out).alpha == 4.0


def test_the_result_is_served_for_the_domains_asked_for(tmp_path):
    """--domains scopes where serving picks the result (an adapter that measured worse than
    the plain model in one of its domains); without it, every part's domains."""
    one = _adapter(tmp_path / "one.gguf", seed=1, alpha=16, rank=4)
    out = tmp_path / "m.gguf"
    halves = [f"{one}*0.5", f"{one}*0.5"]
    assert main(["adapters", "merge", *halves, "--domains", "mcp-mirror", "--out", str(out)]) == 0
    assert read_adapter_info(out).domains == ("mcp-mirror",)
    assert np.allclose(_change(out), _change(one), atol=1e-2)  # the same change
    assert main(["adapters", "merge", *halves, "--domains", " , ", "--out", str(out)]) == 2


def test_one_adapter_alone_is_copied_bit_for_bit_under_other_domains(tmp_path):
    """Moving a trained adapter to other domains needs no rank cut: its tensors are written
    as they were (alpha equal to the rank: llama.cpp's scale 1), only the metadata changes."""
    one = _adapter(tmp_path / "one.gguf", seed=1, alpha=4, rank=4)
    out = tmp_path / "copy.gguf"
    assert main(["adapters", "merge", str(one), "--domains", "mcp-mirror", "--out", str(out)]) == 0
    assert read_adapter_info(out).domains == ("mcp-mirror",)

    def tensors(path: Path) -> dict[str, bytes]:
        return {t.name: bytes(t.data.tobytes()) for t in GGUFReader(path).tensors}

    assert tensors(out) == tensors(one)
    halved = merge_adapters([SoupPart(one, 0.5)], tmp_path / "half.gguf")
    assert np.allclose(_change(halved.path), 0.5 * _change(one), atol=1e-2)
