"""The built-in sessions of ``aw-mcp eval everyday``: commands and their order, nothing else.

A module of its own so that the command line can offer them by name without importing the
evaluation machinery (the simulator, the MCP SDK) at start-up.
"""

from __future__ import annotations

# Everyday commands of a first session (not a training script: its own list and order). The
# world-model issue's goal is 90% of them answered as the real machine does.
EVERYDAY_COMMANDS: tuple[str, ...] = (
    "pwd",
    "whoami",
    "hostname",
    "ls",
    "cat requirements.txt",
    "git status",
    "git branch",
    "python3 --version",
    "git --version",
    "mkdir demo && cd demo && touch a.txt && ls",
    "pwd",
    "cd ..",
    "echo hello world",
    "echo $((6 * 7))",
    "cat missing.txt",
    "ls tests",
    "head -n 1 README.md",
    "echo $HOME",
    "rm requirements.txt && ls",
    "cat requirements.txt",
)

# A second session, written on 2026-12-05 after the first reached 90%, and never trained or
# tuned on: what an agent types on its first look at the project. It says how far the first
# session's score carries to commands nobody chose for it (long listings, line counts, files
# the session itself made, git's short forms). Keep it as it is: its score is comparable
# only while its commands and their order stay the same.
FIRST_LOOK_COMMANDS: tuple[str, ...] = (
    "ls -la",
    "cat README.md",
    "wc -l main.py",
    "grep -n route main.py",
    "git log --oneline",
    "ls -1 tests",
    "cat tests/test_main.py",
    "echo $USER",
    'basename "$PWD"',
    'python3 -c "print(2 ** 10)"',
    "echo 'print(\"hi\")' > hello.py && python3 hello.py",
    "ls *.py",
    "test -f setup.py && echo yes || echo no",
    "cat setup.py",
    "git status --short",
    "git diff --stat",
    "mkdir -p build/out && ls build",
    "cp README.md NOTES.md && ls",
    "wc -c < requirements.txt",
    "head -n 2 main.py",
    "which python3",
    "uname -s",
    "seq 3",
    "echo done > log.txt && cat log.txt",
    "rm -r build && ls",
)

# A third session, written on 2026-12-05 for the world-that-keeps-state issue before any
# state-keeping model was scored on it, and never trained or tuned on: a session that makes,
# appends, moves, copies, edits, commits and removes, and reads each back. Its answers print
# no value a simulator cannot know (git quiet, subjects only). Keep it as it is.
KEEPS_STATE_COMMANDS: tuple[str, ...] = (
    "ls",
    "mkdir notes",
    "echo 'buy milk' > notes/todo.txt",
    "echo 'call bob' >> notes/todo.txt",
    "cat notes/todo.txt",
    "wc -l notes/todo.txt",
    "mv notes/todo.txt notes/tasks.txt",
    "ls notes",
    "cat notes/todo.txt",
    "cp README.md docs.md",
    "ls",
    "sed -i 's/small/tiny/' README.md",
    "cat README.md",
    "head -n 1 docs.md",
    "git status --short",
    "git add README.md",
    "git status --short",
    'git commit -q -m "Say tiny"',
    "git log --format=%s",
    "git status --short",
    "rm docs.md",
    "ls",
    "cd notes",
    "pwd",
    "sort tasks.txt",
    "grep -n bob tasks.txt",
    "cd ..",
    "cat notes/tasks.txt",
    "git add notes && git commit -q -m 'Add notes'",
    "git status --short",
)

# The built-in sessions, by name (`aw-mcp eval everyday --session NAME`).
SESSIONS: dict[str, tuple[str, ...]] = {
    "everyday": EVERYDAY_COMMANDS,
    "first-look": FIRST_LOOK_COMMANDS,
    "keeps-state": KEEPS_STATE_COMMANDS,
}
