"""Engines: text generation backends behind one protocol, ``base.Engine`` (chat messages in,
text out), picked by name from ``registry``.

- ``llama_cpp``, ``transformers_engine``: local models, both on the ``local`` core (turns, KV
  reuse, snapshots, fair scheduling, continuous batching, constrained decoding);
- ``openai_compat``: a model behind an OpenAI-compatible server (vLLM, SGLang, llama.cpp);
- ``pool``: several instances of one local engine (``--instances``);
- the rest are the local core's parts: ``decoding`` (one generation's token loop),
  ``batching``, ``scheduler``, ``snapshots``, ``sampling``, ``constraints`` with
  ``json_grammar`` and ``text_grammars``, ``loop_guard``, ``counters``.
"""
