"""The ground truth of state from the real sandbox: what a command read (from its strace lines)
and what it changed (two snapshots of the sandbox's folders), first on canned lines and
snapshots, then in a real traced sandbox."""

from __future__ import annotations

from aw_mcp.generation.sandbox import BashSandbox
from aw_mcp.generation.state_trace import (
    Entry,
    Snapshot,
    accesses_of,
    change_of,
    recall_of,
    take_snapshot,
)
from aw_mcp.generation.terminal import generate_terminal
from aw_mcp.generation.worlds import SandboxWorld
from aw_mcp.records.reader import load_record_dir
from aw_mcp.state.steps import (
    Append,
    ChangeDir,
    Copy,
    GitChange,
    GitFacts,
    MakeDir,
    Mode,
    Move,
    PathState,
    Remove,
    Write,
)
from aw_mcp.state.text import render_step
from tests.helpers import needs_sandbox

P = "/home/dev/project"
SHELL = 100

# strace -f -y lines as they come: the shell's own without a pid, its children's after
# [pid N], one syscall split across an <unfinished ...> and its resumption.
TRACE = [
    f'newfstatat(AT_FDCWD<{P}>, ".", {{st_mode=S_IFDIR|0755}}, 0) = 0',
    '[pid 201] execve("/usr/bin/cat", ["cat", "notes.txt"], 0x1 /* 10 vars */) = 0',
    f'[pid 201] openat(AT_FDCWD<{P}>, "/etc/ld.so.cache", O_RDONLY) = 3</etc/ld.so.cache>',
    f'[pid 201] openat(AT_FDCWD<{P}>, "notes.txt", O_RDONLY <unfinished ...>',
    f'[pid 202] openat(AT_FDCWD<{P}>, "gone.txt", O_RDONLY) = -1 ENOENT (No such file)',
    f"[pid 201] <... openat resumed>) = 3<{P}/notes.txt>",
    f'[pid 203] openat(AT_FDCWD<{P}>, ".", O_RDONLY|O_DIRECTORY) = 4<{P}>',
    f"[pid 203] getdents64(4<{P}>, 0x2 /* 4 entries */, 32768) = 104",
    f'[pid 203] newfstatat(AT_FDCWD<{P}>, "big.bin", {{st_mode=S_IFREG}}, 0) = 0',
    f'[pid 204] openat(AT_FDCWD<{P}>, "out.txt", O_WRONLY|O_CREAT|O_TRUNC, 0666) = 3<{P}/out.txt>',
    '[pid 205] execve("/usr/bin/git", ["git", "status"], 0x1 /* 10 vars */) = 0',
    f'[pid 205] openat(AT_FDCWD<{P}>, ".git/HEAD", O_RDONLY) = 3<{P}/.git/HEAD>',
    f'[pid 205] openat(AT_FDCWD<{P}>, "notes.txt", O_RDONLY) = 3<{P}/notes.txt>',
    f"[pid 205] getdents64(5<{P}/src>, 0x2 /* 3 entries */, 32768) = 80",
    '[pid 206] execve("/usr/bin/find", ["find", "."], 0x1 /* 10 vars */) = 0',
    f"[pid 206] getdents64(5<{P}/.git>, 0x2 /* 9 entries */, 32768) = 300",
    '[pid 207] execve("/usr/bin/python3", ["python3", "x.py"], 0x1 /* 10 vars */) = 0',
    f'[pid 207] newfstatat(AT_FDCWD<{P}>, "{P}/json.py", 0x3, 0) = -1 ENOENT (No such file)',
    f"[pid 207] getdents64(3<{P}>, 0x2 /* 4 entries */, 32768) = 104",
    f'[pid 207] openat(AT_FDCWD<{P}>, "x.py", O_RDONLY|O_CLOEXEC) = 3<{P}/x.py>',
    'chdir("sub")                     = 0',
    "--- SIGCHLD {si_signo=SIGCHLD, si_code=CLD_EXITED, si_pid=201} ---",
]


def test_the_trace_says_what_was_opened_listed_looked_up_and_missed():
    seen = accesses_of(TRACE, SHELL, P)
    assert f"{P}/notes.txt" in seen.opened and f"{P}/x.py" in seen.opened
    assert f"{P}/out.txt" not in seen.opened  # opened to write: a change, not a read
    assert seen.listed == {P}  # git's walk of src/ and find's of .git/ are not reads
    assert f"{P}/gone.txt" in seen.missing
    assert f"{P}/json.py" not in seen.missing  # python probing for a module
    assert f"{P}/big.bin" in seen.looked_up
    assert seen.git_read == {f"{P}/.git/HEAD"}  # git's own; find walking .git is not one
    assert seen.shell_cwd == f"{P}/sub"


def _snapshot(files: dict[str, str | tuple[str, int]], repositories=()) -> Snapshot:
    """Paths -> text ("/" ending: a folder; (text, mode) for a mode)."""
    entries = {}
    for path, value in files.items():
        if path.endswith("/"):
            entries[path.rstrip("/")] = Entry("dir", 0o755)
            continue
        text, mode = value if isinstance(value, tuple) else (value, 0o644)
        digest = f"sha-{hash(text)}"
        entries[path] = Entry("file", mode, len(text.encode()), digest, text=text)
    return Snapshot(entries, list(repositories))


def test_recall_is_the_world_before_the_command_for_what_it_read():
    before = _snapshot(
        {
            f"{P}/": "",
            f"{P}/notes.txt": "a\nb\n",
            f"{P}/src/": "",
            f"{P}/big.bin": "x" * 10,
            f"{P}/x.py": "",
        }
    )
    after = _snapshot({f"{P}/notes.txt": "changed\n"})
    facts = GitFacts(repository=P, branch="main", head="Initial commit", status=[])
    seen = accesses_of(TRACE, SHELL, P)
    recall = recall_of(seen, before, after, ["/home"], P, {P: facts})
    assert recall.paths[f"{P}/notes.txt"] == PathState(kind="file", content="a\nb\n")
    listed = ["big.bin", "notes.txt", "src/", "x.py"]
    assert recall.paths[P] == PathState(kind="dir", entries=listed)
    assert recall.paths[f"{P}/gone.txt"] == PathState(kind="missing")
    assert recall.paths[f"{P}/big.bin"] == PathState(kind="file", size=10)
    assert "/etc/ld.so.cache" not in recall.paths  # outside the world's folders
    assert recall.git == []  # no repository in `before`: git read nothing it holds


def _change(before, after, git_before=None, git_after=None, touched=(), cwd_after=P):
    return change_of(
        _snapshot(before),
        _snapshot(after),
        P,
        cwd_after,
        git_before or {},
        git_after or {},
        set(touched),
    )


def test_a_file_moved_into_a_new_folder_is_one_move_and_the_folder_is_implied():
    ops = _change({f"{P}/a.txt": "hi\n"}, {f"{P}/d/": "", f"{P}/d/e/": "", f"{P}/d/a.txt": "hi\n"})
    assert ops == [MakeDir(path=f"{P}/d/e"), Move(source=f"{P}/a.txt", target=f"{P}/d/a.txt")]


def test_a_folder_moved_whole_is_one_move():
    before = {f"{P}/src/": "", f"{P}/src/a.py": "1\n", f"{P}/src/b.py": "2\n"}
    after = {f"{P}/lib/": "", f"{P}/lib/a.py": "1\n", f"{P}/lib/b.py": "2\n"}
    assert _change(before, after) == [Move(source=f"{P}/src", target=f"{P}/lib")]


def test_appends_writes_copies_modes_and_removals():
    before = {
        f"{P}/log.txt": "one\n",
        f"{P}/conf.ini": "a=1\n",
        f"{P}/run.sh": "echo\n",
        f"{P}/old/": "",
        f"{P}/old/x": "x\n",
    }
    after = {
        f"{P}/log.txt": "one\ntwo\n",
        f"{P}/conf.ini": "a=2\n",
        f"{P}/run.sh": ("echo\n", 0o755),
        f"{P}/run2.sh": "echo\n",
        f"{P}/empty": "",
    }
    assert _change(before, after) == [
        Remove(path=f"{P}/old"),
        Write(path=f"{P}/empty", content=""),
        Copy(source=f"{P}/run.sh", target=f"{P}/run2.sh"),
        Write(path=f"{P}/conf.ini", content="a=2\n"),
        Append(path=f"{P}/log.txt", text="two\n"),
        Mode(path=f"{P}/run.sh", mode="755"),
    ]


def test_repository_facts_change_only_where_git_worked_and_the_working_directory_last():
    was = GitFacts(repository=P, branch="main", head="Initial commit", status=[])
    edited = was.model_copy(update={"status": [" M a.txt"]})
    files = {f"{P}/a.txt": "1\n"}
    # an edit by another program: git's status moves, but that is git's to say when asked
    assert _change(files, {f"{P}/a.txt": "2\n"}, {P: was}, {P: edited}) == [
        Write(path=f"{P}/a.txt", content="2\n")
    ]
    committed = was.model_copy(update={"head": "Edit a"})
    ops = _change(files, files, {P: was}, {P: committed}, touched=[P], cwd_after="/tmp")
    assert ops == [GitChange(facts=committed), ChangeDir(path="/tmp")]
    new_repo = GitFacts(repository=f"{P}/sub", branch="main", head=None, status=[])
    assert _change(files, files, {}, {f"{P}/sub": new_repo}) == [GitChange(facts=new_repo)]
    assert _change(files, files, {P: was}, {}) == [Remove(path=f"{P}/.git")]


def test_snapshots_leave_git_folders_to_the_repository_facts(tmp_path):
    (tmp_path / "p" / ".git" / "objects").mkdir(parents=True)
    (tmp_path / "p" / "a.txt").write_text("hi\n")
    (tmp_path / "p" / "blob").write_bytes(b"\0\1\2")
    (tmp_path / "p" / "link").symlink_to("a.txt")
    snapshot = take_snapshot({"/home": tmp_path})
    assert snapshot.repositories == ["/home/p"]
    assert sorted(snapshot.entries) == ["/home/p", "/home/p/a.txt", "/home/p/blob", "/home/p/link"]
    assert snapshot.entries["/home/p/a.txt"].text == "hi\n"
    assert snapshot.entries["/home/p/blob"].text is None
    assert snapshot.entries["/home/p/blob"].size == 3
    assert snapshot.entries["/home/p/link"].target == "a.txt"


WORLD = SandboxWorld(
    user="dev",
    hostname="devbox",
    working_directory=P,
    files={"notes.txt": "a\nb\nc\n", "src/app.py": "print(1)\n"},
    git_commits=("Initial commit",),
)


@needs_sandbox
def test_a_real_session_records_what_each_command_read_and_changed():
    with BashSandbox(world=WORLD, trace_state=True) as sandbox:

        def step(command: str):
            output, _, state = sandbox.run_traced(command)
            return output, state

        out, cat = step("wc -l notes.txt missing.txt")
        assert out.startswith("3 notes.txt")
        assert cat.recall.paths == {
            f"{P}/notes.txt": PathState(kind="file", content="a\nb\nc\n"),
            f"{P}/missing.txt": PathState(kind="missing"),
        }
        assert cat.change == []
        _, listing = step("ls")
        assert listing.recall.paths[P].entries == [".git/", "notes.txt", "src/"]
        _, append = step("echo d >> notes.txt")
        assert append.change == [Append(path=f"{P}/notes.txt", text="d\n")]
        _, moved = step("mkdir -p old && mv notes.txt old/")
        assert moved.change == [
            MakeDir(path=f"{P}/old"),
            Move(source=f"{P}/notes.txt", target=f"{P}/old/notes.txt"),
        ]
        _, status = step("git status --short")
        [facts] = status.recall.git
        assert (facts.branch, facts.head) == ("main", "Initial commit")
        assert facts.status == [" D notes.txt", "?? old/"]
        assert status.recall.paths == {}  # the files git hashed are not the user's reads
        _, commit = step("git add -A && git commit -qm 'Move notes'")
        assert commit.change == [
            GitChange(facts=facts.model_copy(update={"head": "Move notes", "status": []}))
        ]
        _, cd = step("cd old && sed -i 's/b/B/' notes.txt")
        assert cd.recall.paths[f"{P}/old/notes.txt"].content == "a\nb\nc\nd\n"
        assert cd.change == [
            Write(path=f"{P}/old/notes.txt", content="a\nB\nc\nd\n"),
            ChangeDir(path=f"{P}/old"),
        ]
        _, relative = step("cat notes.txt > copy.txt")
        assert relative.cwd == f"{P}/old"  # the next command starts where cd left it
        assert relative.change == [Copy(source=f"{P}/old/notes.txt", target=f"{P}/old/copy.txt")]
        assert "cp notes.txt copy.txt" in render_step(relative)


@needs_sandbox
def test_generated_records_hold_each_commands_state_unless_told_not_to(tmp_path):
    generate_terminal(tmp_path / "on", seed=5, episodes=1, worlds="varied")
    generate_terminal(tmp_path / "off", seed=5, episodes=1, worlds="varied", trace_state=False)
    [on] = load_record_dir(tmp_path / "on")
    [off] = load_record_dir(tmp_path / "off")
    assert all(r.state is not None for r in on.records)
    assert any(r.state.recall.paths or r.state.change for r in on.records if r.state)
    assert all(r.state is None for r in off.records)
    assert [r.arguments for r in on.records] == [r.arguments for r in off.records]
