"""Which LoRA adapters serving uses, and with which prompt profile (metadata only, no model)."""

from __future__ import annotations

import pytest

from aw_mcp.adapters import AdapterError, bundled_adapters, read_adapter_info
from aw_mcp.config import ServeSettings
from aw_mcp.runtime import build_catalogue, resolve_adapters, serving_profile
from tests.conftest import REPO_ROOT


def _resolve(**settings):
    settings = ServeSettings(**settings)
    adapters = resolve_adapters(settings, build_catalogue(settings))
    return adapters, serving_profile(settings, adapters)


def test_the_bundled_adapter_says_how_it_was_trained():
    (path,) = bundled_adapters()
    info = read_adapter_info(path)
    assert info.profile == "small"
    assert info.domains == ("terminal",)
    assert info.base_model and info.base_model.endswith(".gguf")
    assert info.alpha > 0


def test_the_embedded_model_serving_terminal_gets_the_bundled_adapter_and_its_profile():
    adapters, profile = _resolve()
    assert [a.path for a in adapters] == bundled_adapters()
    assert profile == "small"


@pytest.mark.parametrize(
    "settings",
    [
        {"no_lora": True},
        {"simulator": ["terminal", "search"]},  # not trained on search
        {"model": REPO_ROOT / "some-other-model.gguf"},  # a user's model gets no default
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
        _resolve(lora=bundled_adapters(), no_lora=True)
    with pytest.raises(ValueError, match="llama-cpp engine only"):
        _resolve(lora=bundled_adapters(), engine="openai")
