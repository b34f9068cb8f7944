"""Write records: one JSONL file per episode, one ``CallRecord`` per line, appended as calls end.

The server's own log of what it simulated (``serve --record-dir``), and what ``aw-mcp record``
and the generators write for real calls. Never a file written on an agent's behalf.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from pathlib import Path

from aw_mcp.errors import UserInputError
from aw_mcp.records.calls import CallRecord

log = logging.getLogger(__name__)


RECORD_NAME_CHARS = 80  # of the id, in a record file's name; file systems allow 255 bytes


def record_file_name(episode_id: str) -> str:
    """``<readable part>-<hash>.jsonl``: the readable part is the id with anything but letters,
    digits, ``_.-`` replaced (a leading ``.`` too: no hidden files) and cut short; the hash is
    of the exact id, so ids that read the same (``col/x``, ``col_x``, ``col x``) never share a
    file."""
    readable = re.sub(r"[^A-Za-z0-9_.-]|^\.", "_", episode_id)[:RECORD_NAME_CHARS] or "episode"
    digest = hashlib.blake2b(episode_id.encode("utf-8", "surrogatepass"), digest_size=6)
    return f"{readable}-{digest.hexdigest()}.jsonl"


class RecordSink:
    """Appends each call record as one JSON line to ``DIR/<episode>-<hash>.jsonl`` (the server's
    own log of what it simulated; never a file written on the agent's behalf). Every line
    carries the exact episode id."""

    def __init__(self, directory: Path):
        self.directory = directory
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # a file of that name, no permission: say so, before serving
            problem = "it is a file" if directory.is_file() else exc.strerror or str(exc)
            raise UserInputError(f"cannot keep records in {directory}: {problem}") from None

    def path_for(self, episode_id: str) -> Path:
        return self.directory / record_file_name(episode_id)

    def write(self, record: CallRecord) -> None:
        try:
            # A lone surrogate (valid in a JSON string, not in UTF-8) is written as its JSON
            # escape, so the line stays valid JSON for the exact id or text.
            path = self.path_for(record.episode)
            with path.open("a", encoding="utf-8", errors="backslashreplace") as fh:
                fh.write(json.dumps(record.model_dump(mode="json"), ensure_ascii=False) + "\n")
        except OSError as exc:  # a full disk must not fail the agent's call
            log.error("could not write the record of episode %s: %s", record.episode, exc)


def drop_torn_last_line(path: Path) -> None:
    """Cut off a last line without its newline that is not JSON: the record of a call whose
    process died while writing it (that call was never answered). Left there, the next record
    would be appended to it and the file would stay broken for every reader."""
    with path.open("rb+") as fh:
        data = fh.read()
        cut = data.rfind(b"\n") + 1
        tail = data[cut:]
        if not tail.strip():
            return
        try:
            json.loads(tail)
        except ValueError:
            pass
        else:  # a whole record that only lacks its newline: complete the line
            fh.write(b"\n")
            return
        log.warning(
            "%s: dropping a torn last line (%d bytes) of a call never answered", path, len(tail)
        )
        fh.truncate(cut)
