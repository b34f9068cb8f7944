"""Which LoRA adapters serving uses, and with which prompt profile (metadata only, no model)."""

from __future__ import annotations

import pytest

from aw_mcp.models.adapters import (
    BUNDLED_ADAPTERS,
    AdapterError,
    bundled_adapters,
    read_adapter_info,
)
from aw_mcp.models.catalogue import DEFAULT_MODEL, KNOWN_MODELS, ModelFileError
from aw_mcp.wiring.assemble import build_catalogue, resolve_adapters, serving_profile
from aw_mcp.wiring.settings import ServeSettings
from tests.conftest import REPO_ROOT


def _resolve(**settings):
    settings = ServeSettings(**settings)
    adapters = resolve_adapters(settings, build_catalogue(settings))
    return adapters, serving_profile(settings, adapters)


def bundled(name: str):
    return next(p for p in bundled_adapters() if p.name == name)


def test_every_file_in_adapters_is_pinned_and_every_pin_has_its_file():
    files = sorted(p.name for p in (REPO_ROOT / "adapters").glob("*.gguf"))
    assert sorted(pin.file_name for pin in BUNDLED_ADAPTERS) == files
    assert [p.name for p in bundled_adapters()] == files  # each one verified


def test_a_bundled_adapter_that_is_not_its_pinned_bytes_is_refused(tmp_path, monkeypatch):
    original = REPO_ROOT / "adapters" / "smollm2-135m-terminal.gguf"
    tampered = tmp_path / original.name
    data = bytearray(original.read_bytes())
    data[-1] ^= 0xFF  # same size, other bytes
    tampered.write_bytes(bytes(data))
    (tmp_path / "unpinned.gguf").write_bytes(original.read_bytes())
    monkeypatch.setattr("aw_mcp.models.adapters.bundled_dir", lambda name: tmp_path)
    with pytest.raises(ModelFileError, match=r"sha256 .*expected 447ca754"):
        bundled_adapters()
    tampered.unlink()
    assert bundled_adapters() == []  # the unpinned copy is not served


def test_each_bundled_adapter_says_how_it_was_trained():
    smol = read_adapter_info(bundled("smollm2-135m-terminal.gguf"))
    qwen = read_adapter_info(bundled("qwen2.5-coder-0.5b.gguf"))
    web = read_adapter_info(bundled("qwen2.5-coder-0.5b-web.gguf"))
    swe = read_adapter_info(bundled("qwen2.5-coder-0.5b-swe.gguf"))
    mirrors = read_adapter_info(bundled("qwen2.5-coder-0.5b-mirrors.gguf"))
    assert (smol.profile, smol.domains) == ("small", ("terminal",))
    assert (mirrors.profile, mirrors.domains) == ("default", ("mcp-mirror",))
    assert (qwen.profile, qwen.domains) == ("small", ("os", "swe", "terminal"))
    assert (web.profile, web.domains) == ("small", ("web",))
    assert (swe.profile, swe.domains) == ("small", ("swe",))
    assert smol.base_model == KNOWN_MODELS["smollm2-135m"].file_name
    assert qwen.base_model == web.base_model == swe.base_model == mirrors.base_model
    assert qwen.base_model == KNOWN_MODELS[DEFAULT_MODEL].file_name
    assert smol.alpha > 0 and qwen.alpha > 0 and web.alpha > 0 and swe.alpha > 0


def test_the_web_world_gets_its_own_adapter_and_a_mix_with_web_gets_none(monkeypatch):
    """One adapter per trained domain group: web alone is served with the web adapter; web
    beside terminal matches neither adapter's domains, so the plain model serves both."""
    monkeypatch.delenv("AW_MCP_MODEL", raising=False)  # conftest's plumbing model
    adapters, profile = _resolve(simulator=["web"])
    assert [a.path for a in adapters] == [bundled("qwen2.5-coder-0.5b-web.gguf")]
    assert profile == "small"
    assert _resolve(simulator=["web", "terminal"]) == ([], "default")


def test_the_default_model_gets_its_own_adapter_and_profile_in_each_trained_domain(monkeypatch):
    monkeypatch.delenv("AW_MCP_MODEL", raising=False)  # conftest's plumbing model
    for domains in (["terminal"], ["os"], ["terminal", "os"]):  # swe: the test below
        adapters, profile = _resolve(simulator=domains)
        assert [a.path for a in adapters] == [bundled("qwen2.5-coder-0.5b.gguf")], domains
        assert profile == "small"


def test_every_mirrored_server_gets_the_mirrors_adapter_and_the_bundled_mcp_world_does_not(
    monkeypatch,
):
    """Adapters know every mirrored capture by one domain (``mcp-mirror``), as training
    records them: the mirrors' adapter serves sqlite, a server no training episode comes
    from, with the profile it was trained with. The bundled ``mcp`` world is not a mirror
    (the adapter lost it), and a mirror beside terminal matches no adapter."""
    monkeypatch.delenv("AW_MCP_MODEL", raising=False)
    capture = REPO_ROOT / "tests/data/records/sqlite/tools/sqlite.json"
    adapters, profile = _resolve(tools_from=[capture])
    assert [a.path for a in adapters] == [bundled("qwen2.5-coder-0.5b-mirrors.gguf")]
    assert profile == "default"
    assert _resolve(tools_from=[capture], simulator=["terminal"])[0] == []
    assert _resolve(simulator=["mcp"]) == ([], "default")


def test_a_domains_own_adapter_wins_over_the_shared_one_and_adapters_never_stack(monkeypatch):
    """swe has its own adapter beside the shared terminal/os/swe one: swe alone is served with
    its own, swe beside terminal or os with the shared one; one adapter each time, the one
    trained on the fewest domains that cover the served ones."""
    monkeypatch.delenv("AW_MCP_MODEL", raising=False)  # conftest's plumbing model
    own, shared = bundled("qwen2.5-coder-0.5b-swe.gguf"), bundled("qwen2.5-coder-0.5b.gguf")
    assert [a.path for a in _resolve(simulator=["swe"])[0]] == [own]
    assert [a.path for a in _resolve(simulator=["swe", "terminal"])[0]] == [shared]
    assert [a.path for a in _resolve(simulator=["os", "swe"])[0]] == [shared]


def test_smollm2_serving_terminal_gets_its_own_adapter_not_qwens():
    adapters, profile = _resolve(model="smollm2-135m")
    assert [a.path for a in adapters] == [bundled("smollm2-135m-terminal.gguf")]
    assert profile == "small"
    assert _resolve(model="smollm2-135m", simulator=["os"]) == ([], "default")


@pytest.mark.parametrize(
    "settings",
    [
        {"no_lora": True},
        {"simulator": ["terminal", "search"]},  # not trained on search
        {"simulator": ["web"]},  # its episodes were all longer than --max-tokens
        {"simulator": ["mcp"]},  # trained on, but it measured worse than the plain base
        {"model": str(REPO_ROOT / "some-other-model.gguf")},  # a user's model: no default
        {"engine": "transformers"},
    ],
)
def test_no_default_adapter(settings):
    adapters, profile = _resolve(**settings)
    assert adapters == [] and profile == "default"


def test_an_explicit_profile_wins_over_the_adapters():
    adapters, profile = _resolve(profile="default")
    assert adapters and profile == "default"


def test_bad_adapter_settings_are_clear_errors(tmp_path):
    not_gguf = tmp_path / "x.gguf"
    not_gguf.write_text("hello")
    with pytest.raises(AdapterError, match="not a GGUF file"):
        _resolve(lora=[not_gguf])
    with pytest.raises(AdapterError, match="not found"):
        _resolve(lora=[tmp_path / "missing.gguf"])
    with pytest.raises(ValueError, match="contradict"):
        _resolve(lora=bundled_adapters()[:1], no_lora=True)
    with pytest.raises(ValueError, match="llama-cpp engine only"):
        _resolve(lora=bundled_adapters()[:1], engine="openai")
