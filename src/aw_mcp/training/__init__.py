"""Fine-tune a world model on recorded real episodes (``aw-mcp train``).

Install with ``pip install 'aw-mcp[train]'`` (torch, transformers, peft, gguf, accelerate).

record dirs --(examples.py: rendered as the server renders each call)--> token sequences
  --(lora.py: base GGUF in transformers + peft LoRA; trainer.py: the loop)--> LoRA weights
  --(gguf_adapter.py)--> ``adapter.gguf`` that llama.cpp loads on the base GGUF
  (``aw-mcp serve --lora FILE``; the bundled one is used by default).

``job`` is the run (``TrainJob``, ``run_training``); ``trainer`` the loop and ``TrainSettings``,
its hyper-parameters; ``adapter_soup`` merges adapters (``aw-mcp adapters merge``).
"""
