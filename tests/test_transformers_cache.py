"""The key-value cache's name, as the installed transformers spells it (``past_key_values``
up to 5.17, ``cache`` by 5.25): the engine and the trainer pass and read it by this name."""

from __future__ import annotations

import inspect

import pytest

from aw_mcp.engines.transformers_cache import cache_argument, cache_name, output_cache

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.transformers


def test_the_name_is_the_one_the_installed_models_take_and_return():
    from transformers.modeling_outputs import BaseModelOutputWithPast, CausalLMOutputWithPast
    from transformers.models.llama.modeling_llama import LlamaForCausalLM, LlamaModel

    name = cache_name()
    for model in (LlamaModel, LlamaForCausalLM):
        assert name in inspect.signature(model.forward).parameters, transformers.__version__
    for output in (BaseModelOutputWithPast, CausalLMOutputWithPast):
        assert name in output.__dataclass_fields__, transformers.__version__
    marker = object()
    assert cache_argument(marker) == {name: marker}
    assert output_cache(BaseModelOutputWithPast(**{name: marker})) is marker
