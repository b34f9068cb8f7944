"""The episode's current state: built from world facts, kept by applying each step's change
(bookkeeping, never running a command), looked up next to a call; hostile changes are refused
one by one and never break the rest."""

from __future__ import annotations

from aw_mcp.generation.sandbox import BashSandbox
from aw_mcp.generation.state_trace import take_snapshot
from aw_mcp.generation.worlds import SandboxWorld
from aw_mcp.state import world as world_module
from aw_mcp.state.steps import (
    MAX_TEXT_BYTES,
    Append,
    ChangeDir,
    Copy,
    GitChange,
    GitFacts,
    Link,
    MakeDir,
    Mode,
    Move,
    PathState,
    Remove,
    Write,
)
from aw_mcp.state.world import WorldState, news_only
from tests.helpers import needs_sandbox

P = "/home/dev/project"
FACTS = {
    "working_directory": P,
    "home": "/home/dev",
    "files": {"README.md": "# project\n", "src/app.py": "print(1)\n"},
    "git": {"repository": P, "branch": "main", "commits": ["Initial", "Add app"]},
}


def test_a_world_starts_as_its_facts_say():
    state = WorldState.from_facts(FACTS)
    assert state is not None and state.cwd == P
    assert state.state_of(f"{P}/README.md") == PathState(kind="file", content="# project\n")
    assert state.entries(P) == [".git/", "README.md", "src/"]
    assert state.git[P] == GitFacts(repository=P, branch="main", head="Add app", status=[])
    assert state.state_of("/home/dev").kind == "dir"
    assert WorldState.from_facts({"files": "none"}) is None  # no working directory named


def test_every_op_applies_as_bookkeeping():
    state = WorldState.from_facts(FACTS)
    problems = state.apply(
        [
            MakeDir(path=f"{P}/old/deep"),
            Move(source=f"{P}/src", target=f"{P}/lib"),
            Copy(source=f"{P}/README.md", target=f"{P}/old/README.md"),
            Append(path=f"{P}/README.md", text="more\n"),
            Write(path=f"{P}/logo.png", size=4096),
            Link(path=f"{P}/latest", target="lib"),
            Mode(path=f"{P}/lib/app.py", mode="755"),
            Remove(path=f"{P}/old/deep"),
            GitChange(facts=GitFacts(repository=P, branch="dev", head="Move", status=[])),
            ChangeDir(path=f"{P}/lib"),
        ]
    )
    assert problems == []
    assert state.entries(P) == [".git/", "README.md", "latest", "lib/", "logo.png", "old/"]
    assert state.state_of(f"{P}/lib/app.py").content == "print(1)\n"
    assert state.state_of(f"{P}/src") is None
    assert state.state_of(f"{P}/README.md").content == "# project\nmore\n"
    assert state.state_of(f"{P}/old/README.md").content == "# project\n"
    assert state.entries(f"{P}/old") == ["README.md"]
    assert state.modes[f"{P}/lib/app.py"] == "755"
    assert state.git[P].branch == "dev" and state.cwd == f"{P}/lib"
    state.apply([Remove(path=f"{P}/.git")])
    assert state.git == {} and state.repository_of(P) is None


def test_hostile_changes_are_refused_one_by_one_and_the_rest_applies(monkeypatch):
    state = WorldState.from_facts(FACTS)
    huge = "x" * (MAX_TEXT_BYTES + 1)
    problems = state.apply(
        [
            Write(path="relative.txt", content="no"),
            Move(source=f"{P}/src", target=f"{P}/src/inside"),
            Write(path=f"{P}/huge.txt", content=huge),  # kept by its size only
            Write(path=f"{P}/ok.txt", content="fine\n"),
            ChangeDir(path="nowhere"),
            Remove(path="/"),
            Move(source="/home/../", target="/tmp/everything"),
            Write(path="/proc/self/mem", content="x"),
            Write(path="/bad\0path", content="x"),
        ]
    )
    assert problems == [
        "write: 'relative.txt' is not an absolute path",
        "mv: a path cannot go into itself",
        "cd: 'nowhere' is not an absolute path",
        "rm: the root folder is not a path a step changes",
        "mv: the root folder is not a path a step changes",
        "write: /proc/self/mem is outside the world's files",
        "write: not a path",
    ]
    assert state.state_of(f"{P}/README.md") is not None  # nothing was wiped
    assert state.state_of(f"{P}/huge.txt") == PathState(kind="file", size=MAX_TEXT_BYTES + 1)
    assert state.state_of(f"{P}/ok.txt").content == "fine\n" and state.cwd == P
    monkeypatch.setattr(world_module, "MAX_PATHS", len(state.paths) + 1)
    problems = state.apply([Write(path=f"{P}/{n}", content="") for n in range(3)])
    assert problems == ["write: the store holds 9 paths at most"] * 2
    assert state.state_of(f"{P}/0") is not None and state.state_of(f"{P}/2") is None


def test_moving_what_the_store_never_saw_leaves_a_file_of_unknown_content():
    state = WorldState(P)
    assert state.apply([Move(source="/tmp/x", target=f"{P}/x")]) == []
    assert state.state_of(f"{P}/x") == PathState(kind="file")
    assert state.apply([Append(path=f"{P}/new.log", text="one\n")]) == []
    assert state.state_of(f"{P}/new.log").content == "one\n"


def test_the_view_next_to_a_call_looks_up_the_words_it_names_and_interprets_nothing():
    state = WorldState.from_facts(FACTS)
    view = state.view({"command": "cat src/app.py missing.txt > out.txt; wc -l *.md"})
    assert view.startswith(f"<state>\ncwd {P}\n") and view.endswith("</state>")
    assert "file src/app.py\n1|print(1)" in view
    assert "README.md\n1|" not in view  # a glob is not looked up
    # a file the project's folder, listed in full, does not hold is missing before the call
    assert "missing missing.txt" in view and "missing out.txt" in view
    assert "dir .\n|.git/\n|README.md\n|src/" in view
    assert 'git . main "Add app"' in view
    assert state.view({"path": f"{P}/README.md", "count": 3}).count("file README.md") == 1


def test_the_summary_for_cut_history_gives_every_path_with_long_text_by_size():
    state = WorldState.from_facts(FACTS)
    state.apply([Write(path=f"{P}/long.txt", content="a\nb\nc\nd\ne\n")])
    summary = state.summary()
    assert "file long.txt (10 bytes)" in summary
    assert "file README.md\n1|# project" in summary and "file src/app.py\n1|print(1)" in summary
    assert 'git . main "Add app"' in summary


@needs_sandbox
def test_the_sandboxs_changes_applied_in_order_rebuild_the_real_final_state():
    """Every change the generator records, applied by the store from the world's facts,
    ends where the real sandbox ended: each path and each text file's content."""
    world = SandboxWorld(
        user="dev",
        hostname="devbox",
        working_directory=P,
        files=dict(FACTS["files"]),
        git_commits=("Initial", "Add app"),
    )
    commands = [
        "mkdir -p docs/old && echo hi > docs/a.txt && cp README.md docs/",
        "mv src lib && printf 'x\\ny\\n' >> lib/app.py",
        "sed -i 's/x/X/' lib/app.py && chmod +x lib/app.py && ln -s lib current",
        "cd docs && mv a.txt old/ && rm README.md && touch empty",
        "cd .. && git add -A && git commit -qm Reorganise && git checkout -qb feature",
        'rm -rf docs/old && python3 -c \'open("gen.txt","w").write("1\\n")\'',
    ]
    state = WorldState.from_facts(world.facts())
    with BashSandbox(world=world, trace_state=True) as sandbox:
        for command in commands:
            _, code, step = sandbox.run_traced(command)
            assert code == 0, command
            assert state.apply(step.change) == [], command
        real = take_snapshot(sandbox._mounts())
    under = {p: e for p, e in real.entries.items() if p.startswith(P + "/")}
    kept = {p: s for p, s in state.paths.items() if p.startswith(P + "/")}
    assert sorted(kept) == sorted(under)
    for path, entry in under.items():
        assert kept[path].kind == entry.kind, path
        if entry.kind == "file":
            assert kept[path].content == entry.text, path
    assert state.modes == {f"{P}/lib/app.py": "755"}
    assert (state.git[P].branch, state.git[P].head) == ("feature", "Reorganise")
    assert state.cwd == P


def test_making_a_folder_keeps_what_is_known_under_its_new_parents():
    """Folders implied by a write two levels down are made without dropping what an earlier
    write put there (pytest writing .pytest_cache/v/cache/nodeids, then .../stepwise)."""
    state = WorldState(P, "/home/dev")
    assert state.state_of(P) == PathState(kind="dir", entries=[])
    cache = f"{P}/.pytest_cache/v/cache"
    state.apply(
        [Write(path=f"{cache}/nodeids", content="[]"), Write(path=f"{cache}/stepwise", content="")]
    )
    assert state.state_of(cache) == PathState(kind="dir", entries=["nodeids", "stepwise"])
    assert state.state_of(f"{P}/.pytest_cache") == PathState(kind="dir", entries=["v/"])


def test_the_view_says_missing_only_where_the_store_lists_the_folder_in_full():
    state = WorldState.from_facts(FACTS)
    assert state is not None
    state.apply([Move(source=f"{P}/README.md", target=f"{P}/docs/README.md")])
    view = state.view({"command": "cat README.md src/gone.py ../other.txt /etc/hosts"})
    assert "missing README.md" in view and "missing src/gone.py" in view
    # above the project's folder, and outside it, the store does not know every path
    assert "other.txt" not in view and "/etc/hosts" not in view
    # plain words, patterns, variables and options name no file
    view = state.view({"command": "grep -n bob *.txt $HOME/x.txt --out=a.txt 's/a/b/' 0.5"})
    assert "missing" not in view
    assert "missing .env" in state.view({"command": "cat .env"})
    # a folder listed in part (a world copied from a directory) says nothing of the rest
    state.apply([MakeDir(path=f"{P}/big")])
    state.paths[f"{P}/big"] = PathState(kind="dir", unlisted="40 more, not listed")
    assert "missing" not in state.view({"command": "cat big/x.txt"})


def test_the_view_names_what_changed_since_the_repositorys_facts():
    """The repository's facts are those git last reported; what steps changed in its work
    tree since is named beside them (bookkeeping: no status is computed)."""
    state = WorldState.from_facts(FACTS)
    assert state is not None
    assert "changed since these facts" not in state.view({"command": "git status"})
    state.apply([Write(path=f"{P}/README.md", content="# new\n")])
    state.apply([Move(source=f"{P}/src/app.py", target=f"{P}/app.py"), MakeDir(path="/tmp/x")])
    view = state.view({"command": "git status --short"})
    assert "changed since these facts: README.md app.py src/app.py" in view
    # a step in which git reported the repository's facts: they are as of its end
    facts = GitFacts(repository=P, branch="main", head="Add app", status=[" M README.md"])
    state.apply([Write(path=f"{P}/b.txt", content="b\n"), GitChange(facts=facts)])
    view = state.view({"command": "git status"})
    assert "changed since these facts" not in view and "| M README.md" in view
    # outside the repository, or inside .git: nothing for git to see
    state.apply([Write(path="/home/dev/notes.txt", content="x\n")])
    state.apply([Write(path=f"{P}/.git/info/exclude", content="x\n")])
    assert "changed since these facts" not in state.view({"command": "git status"})


def test_a_view_shows_a_block_once_and_as_above_while_it_is_the_same():
    """A file's content, a folder's entries and a repository's status stand in the prompt
    once: a later view that would repeat them word for word gives their head line only."""
    state = WorldState.from_facts(FACTS)
    assert state is not None
    first = news_only(state.view({"command": "cat README.md"}), [])
    assert first == state.view({"command": "cat README.md"})  # nothing shown before
    again = news_only(state.view({"command": "wc -l README.md"}), [first, None])
    assert "dir . as above" in again and "file README.md as above" in again
    assert "|# demo" not in again and f"cwd {P}" in again
    # what changed is shown whole, the rest still cut; one-line blocks are always shown
    state.apply([Write(path=f"{P}/README.md", content="# new\n")])
    changed = news_only(state.view({"command": "cat README.md nope.txt"}), [first, again])
    assert "file README.md\n1|# new" in changed and "missing nope.txt" in changed
    # back to the first content: the last showing (# new) differs, so it is shown whole
    state.apply([Write(path=f"{P}/README.md", content="# demo\n")])
    back = news_only(state.view({"command": "cat README.md"}), [first, again, changed])
    assert "file README.md\n1|# demo" in back
    # the same names from another working directory are other paths: shown whole
    elsewhere = first.replace(f"cwd {P}", "cwd /srv")
    assert news_only(elsewhere, [first]) == elsewhere
    assert news_only("not a view", [first]) == "not a view"
