"""Data files: YAML and JSONL read into pydantic models with errors that name file, line and
field (``yaml``, ``jsonl``), and where the bundled data folders are (``bundled``)."""
