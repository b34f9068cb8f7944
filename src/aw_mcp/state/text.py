"""The text form of a step's recall and change: what the world model writes before its answer.

Short on purpose (every token is latency on a CPU), one fact a line, paths relative to the
working directory the call started in::

    <recall>
    file notes.txt
    1|buy apples
    2|call bob
    dir .
    |notes.txt
    |src/
    missing todo.md
    git . main "Initial commit"
    | M notes.txt
    </recall>
    <change>
    append notes.txt
    |pay rent
    mkdir old
    mv draft.txt old/draft.txt
    git . main "Add notes"
    cd old
    </change>

A text file's lines are numbered in a recall (``wc -l``, ``grep -n``, ``sed -n 5p`` read the
numbers off) and cut the same way every time when long: the first ``HEAD_LINES``, ``...``, the
last ``TAIL_LINES``. Content lines start with ``|``; a ``\\`` line after them says the text has
no final newline. A file that is not text, or too long to keep, is ``(N bytes)``. Paths with
spaces or quotes are JSON strings. ``parse_step`` reads the form back; what it cannot read is
returned as problems, never raised, so a model's bad line costs that line only.
"""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass, field

from pydantic import ValidationError

from aw_mcp.state.steps import (
    Append,
    ChangeDir,
    ChangeOp,
    Copy,
    GitChange,
    GitFacts,
    Link,
    MakeDir,
    Mode,
    Move,
    PathState,
    Recall,
    Remove,
    StepState,
    Write,
)

RECALL_OPEN, RECALL_CLOSE = "<recall>", "</recall>"
CHANGE_OPEN, CHANGE_CLOSE = "<change>", "</change>"
HEAD_LINES = 30  # a recalled file longer than HEAD_LINES + TAIL_LINES lines is cut
TAIL_LINES = 10
MAX_ENTRIES = 60  # a recalled folder's entries shown
# A recall's lines: past this, files are given by their size only (a `grep -r` over a tree).
RECALL_LINES = 160
NO_FINAL_NEWLINE = "\\"
EMPTY = "(empty)"  # a recalled text file with no content at all
_SIZE = re.compile(r"^\((\d+) bytes\)$")
_CHANGE_WORDS = {"git", "ln", "cd", "write", "append", "rm", "mkdir", "mv", "cp", "mode"}
_RECALL_WORDS = {"git", "link", "file", "dir", "missing"}
_NUMBERED = re.compile(r"^(\d+)\|(.*)$")


# --- paths --------------------------------------------------------------------------------


def relative(path: str, cwd: str) -> str:
    """``path`` as the step writes it: ``.``, relative under ``cwd``, else absolute."""
    if path == cwd:
        text = "."
    elif cwd != "/" and path.startswith(cwd + "/"):
        text = path[len(cwd) + 1 :]
    elif cwd == "/" and path.startswith("/"):
        text = path[1:] or "."
    else:
        text = path
    return quote(text)


def absolute(text: str, cwd: str) -> str:
    """A path the step wrote, made absolute against ``cwd`` (``..`` resolved)."""
    path = text if text.startswith("/") else posixpath.join(cwd, text)
    normal = posixpath.normpath(path)
    return "/" + normal.lstrip("/")  # normpath keeps a leading '//'


def quote(text: str) -> str:
    if not text or re.search(r'[\s"]', text) or " -> " in text:
        return json.dumps(text)
    return text


def _split_words(text: str) -> list[str]:
    """Words of an op line: JSON strings or runs without spaces."""
    words: list[str] = []
    decoder = json.JSONDecoder()
    i = 0
    while i < len(text):
        if text[i] == " ":
            i += 1
        elif text[i] == '"':
            value, i = decoder.raw_decode(text, i)
            words.append(str(value))
        else:
            end = text.find(" ", i)
            end = len(text) if end < 0 else end
            words.append(text[i:end])
            i = end
    return words


# --- content ------------------------------------------------------------------------------


def _content_lines(text: str, numbered: bool) -> list[str]:
    lines = text.split("\n")
    final_newline = text.endswith("\n")
    if final_newline or text == "":
        lines = lines[:-1]
    total = len(lines)
    if numbered and total > HEAD_LINES + TAIL_LINES:
        kept = [(n, lines[n - 1]) for n in range(1, HEAD_LINES + 1)]
        tail = [(n, lines[n - 1]) for n in range(total - TAIL_LINES + 1, total + 1)]
        out = [f"{n}|{line}" for n, line in kept] + ["..."] + [f"{n}|{t}" for n, t in tail]
    elif numbered:
        out = [f"{n}|{line}" for n, line in enumerate(lines, start=1)]
    else:
        out = [f"|{line}" for line in lines]
    if text and not final_newline:
        out.append(NO_FINAL_NEWLINE)
    return out


def _file_head(word: str, path: str, content: str | None, size: int | None) -> str:
    if content is None:
        return f"{word} {path} ({size or 0} bytes)"
    return f"{word} {path}"


# --- rendering ----------------------------------------------------------------------------


def _git_line(facts: GitFacts, cwd: str) -> list[str]:
    head = json.dumps(facts.head) if facts.head is not None else "none"
    branch = quote(facts.branch) if facts.branch is not None else "detached"
    return [f"git {relative(facts.repository, cwd)} {branch} {head}"] + [
        f"|{line}" for line in facts.status
    ]


def render_recall(recall: Recall, cwd: str, compact: bool = False) -> str:
    """The ``<recall>`` block ('' when the call read nothing of the world). ``compact``: the
    world model's form, which names what was read and leaves its content to the state shown
    next to the call (no file lines, folder entries or status lines)."""
    if recall.empty:
        return ""
    lines = [RECALL_OPEN]
    for path, state in sorted(recall.paths.items()):
        shown = relative(path, cwd)
        if state.kind == "file":
            if state.content is None or compact:
                size = None if state.content is not None else state.size
                lines.append(f"file {shown}" + (f" ({size} bytes)" if size is not None else ""))
                continue
            content = _content_lines(state.content, numbered=True) or [EMPTY]
            if len(lines) + len(content) > RECALL_LINES:
                lines.append(f"file {shown} ({len(state.content.encode())} bytes)")
            else:
                lines += [f"file {shown}", *content]
        elif state.kind == "dir":
            entries = [] if compact else state.entries or []
            lines.append(f"dir {shown}")
            lines += [f"|{e}" for e in entries[:MAX_ENTRIES]]
            if len(entries) > MAX_ENTRIES:
                lines.append(f"... {len(entries) - MAX_ENTRIES} more")
            if state.unlisted and not compact:
                lines.append(f"... {state.unlisted}")
        elif state.kind == "link":
            lines.append(f"link {shown} -> {state.target}")
        else:
            lines.append(f"missing {shown}")
    for facts in recall.git:
        git = _git_line(facts, cwd)
        lines += git[:1] if compact else git
    lines.append(RECALL_CLOSE)
    return "\n".join(lines)


def render_change(change: list[ChangeOp], cwd: str) -> str:
    """The ``<change>`` block ('' when the call changed nothing)."""
    if not change:
        return ""
    lines = [CHANGE_OPEN]
    for op in change:
        if isinstance(op, Write):
            lines.append(_file_head("write", relative(op.path, cwd), op.content, op.size))
            if op.content is not None:
                lines += _content_lines(op.content, numbered=False)
        elif isinstance(op, Append):
            lines.append(f"append {relative(op.path, cwd)}")
            lines += _content_lines(op.text, numbered=False)
        elif isinstance(op, Remove):
            lines.append(f"rm {relative(op.path, cwd)}")
        elif isinstance(op, MakeDir):
            lines.append(f"mkdir {relative(op.path, cwd)}")
        elif isinstance(op, Move | Copy):
            lines.append(f"{op.op} {relative(op.source, cwd)} {relative(op.target, cwd)}")
        elif isinstance(op, Link):
            lines.append(f"ln {relative(op.path, cwd)} -> {op.target}")
        elif isinstance(op, Mode):
            lines.append(f"mode {relative(op.path, cwd)} {op.mode}")
        elif isinstance(op, ChangeDir):
            lines.append(f"cd {relative(op.path, cwd)}")
        else:
            lines += _git_line(op.facts, cwd)
    lines.append(CHANGE_CLOSE)
    return "\n".join(lines)


def render_step(step: StepState, compact: bool = False) -> str:
    """Both blocks, each on its lines ('' for a step that read and changed nothing);
    ``compact``: the world model's form (``render_recall``)."""
    recall = render_recall(step.recall, step.cwd, compact)
    blocks = [recall, render_change(step.change, step.cwd)]
    return "\n".join(b for b in blocks if b)


# --- parsing ------------------------------------------------------------------------------


@dataclass
class ParsedStep:
    """A step read back from text; ``problems``: the lines that could not be read, and why."""

    step: StepState
    answer: str  # the text after the blocks: what the client sees
    problems: list[str] = field(default_factory=list)
    had_blocks: bool = False


def _block(text: str, opening: str, closing: str) -> tuple[list[str] | None, str, str | None]:
    """(the block's lines or None, the text after it, a problem) when ``text`` opens it."""
    if not text.startswith(opening + "\n") and text.rstrip() != opening:
        return None, text, None
    body_start = len(opening) + 1
    end = text.find("\n" + closing, body_start - 1)
    if end < 0:
        # Never closed: the block is the lines that read as its own (ops of its kind and
        # their content), the answer what follows them (a model that forgot the tag).
        lines = text[body_start:].split("\n")
        words = _RECALL_WORDS if opening == RECALL_OPEN else _CHANGE_WORDS
        n = 0
        while n < len(lines) and (_is_content(lines[n]) or lines[n].split(" ")[0] in words):
            n += 1
        return lines[:n], "\n".join(lines[n:]), f"{opening} is never closed"
    body = text[body_start:end]
    rest = text[end + 1 + len(closing) :]
    return (body.split("\n") if body else []), rest.removeprefix("\n"), None


def _content(lines: list[str], numbered: bool) -> tuple[str, bool]:
    """Content lines back to text; (text, was cut)."""
    out: list[str] = []
    cut = False
    final_newline = True
    for line in lines:
        if line == NO_FINAL_NEWLINE:
            final_newline = False
        elif line == "...":
            cut = True
        elif numbered and (match := _NUMBERED.match(line)):
            out.append(match.group(2))
        else:
            out.append(line[1:])
    text = "\n".join(out)
    return (text + "\n" if out and final_newline else text), cut


def _is_content(line: str) -> bool:
    return (
        line.startswith("|")
        or line in ("...", NO_FINAL_NEWLINE, EMPTY)
        or bool(_NUMBERED.match(line))
        or line.startswith("... ")
    )


def _groups(lines: list[str]) -> list[tuple[str, list[str]]]:
    """Op lines with the content lines (``|...``, ``N|...``, ``...``, ``\\``) under them."""
    groups: list[tuple[str, list[str]]] = []
    for line in lines:
        if _is_content(line) and groups:
            groups[-1][1].append(line)
        elif line.strip():
            groups.append((line, []))
    return groups


def _git_facts(words: list[str], cwd: str, status: list[str]) -> GitFacts:
    if len(words) != 3:
        raise ValueError("git takes a repository, a branch and a subject")
    repository, branch, head = words
    return GitFacts(
        repository=absolute(repository, cwd),
        branch=None if branch == "detached" else branch,
        head=None if head == "none" else head,
        status=[line[1:] for line in status],
    )


def _git_words(line: str) -> list[str]:
    # The subject is a JSON string or `none`; _split_words already decodes JSON strings.
    return _split_words(line[len("git ") :])


def _recall_entry(
    line: str, body: list[str], cwd: str, paths: dict[str, PathState], git: list[GitFacts]
) -> None:
    word, _, rest = line.partition(" ")
    if word not in _RECALL_WORDS:
        raise ValueError(f"unknown recall line {word!r}")
    if word == "git":
        git.append(_git_facts(_git_words(line), cwd, body))
        return
    if word == "link":
        source, arrow, target = rest.partition(" -> ")
        if not arrow:
            raise ValueError("a link is 'link PATH -> TARGET'")
        path = absolute(_split_words(source)[0], cwd)
        paths[path] = PathState(kind="link", target=target)
        return
    words = _split_words(rest)
    if not words:
        raise ValueError(f"{word} needs a path")
    path = absolute(words[0], cwd)
    if word == "file":
        size = _SIZE.match(" ".join(words[1:]))
        if size:
            paths[path] = PathState(kind="file", size=int(size.group(1)))
        elif body == [EMPTY]:
            paths[path] = PathState(kind="file", content="")
        elif body:
            content, _ = _content(body, numbered=True)
            paths[path] = PathState(kind="file", content=content)
        else:  # named only (the compact form)
            paths[path] = PathState(kind="file")
    elif word == "dir":
        entries = [e[1:] for e in body if e.startswith("|")]
        paths[path] = PathState(kind="dir", entries=entries or None)
    elif word == "missing":
        paths[path] = PathState(kind="missing")
    else:
        raise ValueError(f"unknown recall line {word!r}")


def _change_op(line: str, body: list[str], cwd: str) -> ChangeOp:
    word, _, rest = line.partition(" ")
    if word not in _CHANGE_WORDS:
        raise ValueError(f"unknown change line {word!r}")
    if word == "git":
        return GitChange(facts=_git_facts(_git_words(line), cwd, body))
    if word == "ln":
        source, arrow, target = rest.partition(" -> ")
        if not arrow:
            raise ValueError("a link is 'ln PATH -> TARGET'")
        return Link(path=absolute(_split_words(source)[0], cwd), target=target)
    if word == "cd":
        words = _split_words(rest)
        if len(words) != 1:
            raise ValueError("cd takes one path")
        return ChangeDir(path=absolute(words[0], cwd))
    words = _split_words(rest)
    if not words:
        raise ValueError(f"{word} needs a path")
    path = absolute(words[0], cwd)
    if word == "write":
        size = _SIZE.match(" ".join(words[1:]))
        if size:
            return Write(path=path, size=int(size.group(1)))
        content, _ = _content(body, numbered=False)
        return Write(path=path, content=content)
    if word == "append":
        return Append(path=path, text=_content(body, numbered=False)[0])
    if word == "rm":
        return Remove(path=path)
    if word == "mkdir":
        return MakeDir(path=path)
    if word in ("mv", "cp"):
        if len(words) != 2:
            raise ValueError(f"{word} takes two paths")
        target = absolute(words[1], cwd)
        if word == "mv":
            return Move(source=path, target=target)
        return Copy(source=path, target=target)
    if word == "mode":
        if len(words) != 2:
            raise ValueError("mode takes a path and octal bits")
        return Mode(path=path, mode=words[1])
    raise ValueError(f"unknown change line {word!r}")


def parse_step(text: str, cwd: str) -> ParsedStep:
    """Read the blocks at the start of a model's answer (either may be absent) against the
    working directory the call started in. Returns the step, the answer after the blocks, and
    the problems of lines it could not read (those lines are left out; nothing is raised)."""
    problems: list[str] = []
    paths: dict[str, PathState] = {}
    git: list[GitFacts] = []
    change: list[ChangeOp] = []
    rest = text
    had_blocks = False
    read: set[str] = set()
    # The blocks at the start, in the trained order (recall, change) or the other; a block
    # of a kind already read is taken off the answer too but neither read nor applied (a
    # small model sometimes writes its blocks twice), so no block reaches the agent.
    while opening := next((o for o in (RECALL_OPEN, CHANGE_OPEN) if rest.startswith(o)), None):
        closing = RECALL_CLOSE if opening == RECALL_OPEN else CHANGE_CLOSE
        lines, after, problem = _block(rest, opening, closing)
        if lines is None:
            break
        rest = after
        if problem:
            problems.append(problem)
        if opening in read:
            problems.append(f"a second {opening} block: left out of the answer, not read")
            continue
        read.add(opening)
        had_blocks = True
        for line, body in _groups(lines):
            try:
                if opening == RECALL_OPEN:
                    _recall_entry(line, body, cwd, paths, git)
                else:
                    change.append(_change_op(line, body, cwd))
            except (ValueError, ValidationError) as exc:
                problems.append(f"{line[:80]!r}: {_reason(exc)}")
    step = StepState(cwd=cwd, recall=Recall(paths=paths, git=git), change=change)
    return ParsedStep(step=step, answer=rest, problems=problems, had_blocks=had_blocks)


def _reason(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(e["msg"] for e in exc.errors())
    return str(exc)
