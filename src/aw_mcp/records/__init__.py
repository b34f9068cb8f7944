"""Records: every call of an episode, one JSON line each, and what reads and writes them.

- ``calls``: the record of one call, where its answer came from, and the history rule;
- ``sink``: the writer (one JSONL file per episode);
- ``reader``: record directories read back into episodes;
- ``folder``: what a record directory holds beside its JSONL files (world files, captures).
"""
