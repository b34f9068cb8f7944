"""The short text form of a step's recall and change: what it renders, what it reads back, and
what it does with a model's bad or hostile lines (never raises; a bad line costs that line)."""

from __future__ import annotations

import pytest

from aw_mcp.state.steps import (
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
    Recall,
    Remove,
    StepState,
    Write,
)
from aw_mcp.state.text import (
    HEAD_LINES,
    RECALL_LINES,
    TAIL_LINES,
    absolute,
    parse_step,
    relative,
    render_recall,
    render_step,
)

CWD = "/home/dev/project"

EVERY_KIND = StepState(
    cwd=CWD,
    recall=Recall(
        paths={
            f"{CWD}/notes.txt": PathState(kind="file", content="buy tea\ncall bob\n"),
            f"{CWD}/logo.png": PathState(kind="file", size=2048),
            f"{CWD}/empty.txt": PathState(kind="file", content=""),
            f"{CWD}/no-newline.txt": PathState(kind="file", content="x"),
            CWD: PathState(kind="dir", entries=[".git/", "notes.txt", "src/"]),
            f"{CWD}/my file.txt": PathState(kind="missing"),
            f"{CWD}/latest": PathState(kind="link", target="releases/v2"),
            "/srv/data": PathState(kind="dir", entries=["x.csv"]),
        },
        git=[GitFacts(repository=CWD, branch="main", head="Add notes", status=[" M a.txt"])],
    ),
    change=[
        Remove(path=f"{CWD}/old"),
        Move(source=f"{CWD}/draft.txt", target=f"{CWD}/archive/draft 1.txt"),
        MakeDir(path=f"{CWD}/build/out"),
        Copy(source=f"{CWD}/a.txt", target="/tmp/a.txt"),
        Write(path=f"{CWD}/hello.txt", content="hello\n\nworld\n"),
        Write(path=f"{CWD}/blob.bin", size=70000),
        Write(path=f"{CWD}/empty", content=""),
        Append(path=f"{CWD}/notes.txt", text="pay rent\n"),
        Link(path=f"{CWD}/current", target="../v2"),
        Mode(path=f"{CWD}/run.sh", mode="755"),
        GitChange(facts=GitFacts(repository=f"{CWD}/sub", branch=None, head=None, status=[])),
        ChangeDir(path="/tmp"),
    ],
)


def test_every_kind_of_fact_reads_back_as_it_was_written():
    text = render_step(EVERY_KIND)
    parsed = parse_step(text + "\nthe answer\n[exit code: 0]", CWD)
    assert parsed.problems == []
    assert parsed.step == EVERY_KIND
    assert parsed.answer == "the answer\n[exit code: 0]"
    assert parsed.had_blocks


def test_the_form_is_short_and_relative_to_where_the_call_started():
    text = render_step(EVERY_KIND)
    assert "write hello.txt\n|hello\n|\n|world\n" in text
    assert "file notes.txt\n1|buy tea\n2|call bob\n" in text
    assert "file no-newline.txt\n1|x\n\\\n" in text  # no final newline: a `\` line
    assert "file empty.txt\n(empty)\n" in text
    assert "file logo.png (2048 bytes)" in text
    assert 'mv draft.txt "archive/draft 1.txt"' in text  # a path with a space is quoted
    assert "cp a.txt /tmp/a.txt" in text  # outside the working directory: absolute
    assert 'git . main "Add notes"\n| M a.txt' in text
    assert "git sub detached none" in text
    assert text.index("<recall>") < text.index("</recall>") < text.index("<change>")


def test_the_compact_form_names_what_was_read_and_keeps_every_change():
    """The world model's form: the content of what it read stands next to the call already."""
    text = render_step(EVERY_KIND, compact=True)
    recall = text[: text.index("</recall>")]
    assert "file notes.txt\ndir /srv/data" in recall and "1|buy tea" not in recall
    assert "file logo.png (2048 bytes)" in recall
    assert "dir .\n" in recall and "|src/" not in recall
    assert 'git . main "Add notes"\n</recall>' in text[: text.index("<change>")] + "</recall>"
    assert "write hello.txt\n|hello\n|\n|world\n" in text  # changes stay whole
    parsed = parse_step(text + "\nanswer", CWD)
    assert parsed.problems == [] and parsed.step.change == EVERY_KIND.change
    assert parsed.step.recall.paths[f"{CWD}/notes.txt"] == PathState(kind="file")
    assert parsed.step.recall.paths[CWD] == PathState(kind="dir")


def test_a_step_that_read_and_changed_nothing_writes_nothing():
    assert render_step(StepState(cwd=CWD)) == ""
    parsed = parse_step("plain answer", CWD)
    assert parsed.answer == "plain answer" and not parsed.had_blocks and not parsed.problems


@pytest.mark.parametrize(
    ("path", "cwd", "shown"),
    [
        ("/home/dev/project", "/home/dev/project", "."),
        ("/home/dev/project/a/b", "/home/dev/project", "a/b"),
        ("/home/dev/projectx", "/home/dev/project", "/home/dev/projectx"),
        ("/etc/hosts", "/", "etc/hosts"),
        ("/home/dev/a b", "/home/dev", '"a b"'),
    ],
)
def test_paths_are_relative_under_the_working_directory_only(path, cwd, shown):
    assert relative(path, cwd) == shown
    assert absolute(shown.strip('"'), cwd) == path


def test_dotdot_and_double_slashes_resolve_against_the_working_directory():
    assert absolute("../x", CWD) == "/home/dev/x"
    assert absolute("//etc//passwd", CWD) == "/etc/passwd"
    assert absolute("../../../../..", CWD) == "/"


def test_a_long_file_is_cut_the_same_way_every_time_with_its_line_numbers_kept():
    lines = [f"line {n}" for n in range(1, 101)]
    recall = Recall(paths={f"{CWD}/big.txt": PathState(kind="file", content="\n".join(lines))})
    text = render_recall(recall, CWD)
    assert text == render_recall(recall, CWD)
    body = text.split("\n")
    assert body[2] == "1|line 1" and f"{HEAD_LINES}|line {HEAD_LINES}" in body
    assert "..." in body and f"{HEAD_LINES + 1}|line {HEAD_LINES + 1}" not in body
    assert f"{100 - TAIL_LINES + 1}|line {100 - TAIL_LINES + 1}" in body
    assert body[-3:] == ["100|line 100", "\\", "</recall>"]


def test_a_recall_over_many_files_gives_the_ones_past_its_budget_by_size():
    many = {f"{CWD}/f{n:02d}.txt": PathState(kind="file", content="x\n" * 20) for n in range(20)}
    text = render_recall(Recall(paths=many), CWD)
    assert len(text.split("\n")) <= RECALL_LINES + 20
    assert "file f00.txt\n1|x" in text and "file f19.txt (40 bytes)" in text


@pytest.mark.parametrize(
    ("block", "problem"),
    [
        ("<change>\nfrobnicate x\n</change>", "unknown change line"),
        ("<change>\nmv onlyone\n</change>", "takes two paths"),
        ("<change>\nmode run.sh rwx\n</change>", "String should match pattern"),
        ('<change>\nrm "unterminated\n</change>', "Unterminated string"),
        ("<change>\ngit . main\n</change>", "a repository, a branch and a subject"),
        ("<change>\nln nowhere\n</change>", "ln PATH -> TARGET"),
        ("<recall>\nfile\n</recall>", "needs a path"),
        ("<recall>\nbogus thing\n</recall>", "unknown recall line"),
    ],
)
def test_a_bad_line_is_a_problem_and_the_rest_still_reads(block, problem):
    text = block.replace("\n</", "\nwrite ok.txt\n|fine\n</", 1) if "<change>" in block else block
    parsed = parse_step(text + "\nanswer", CWD)
    assert len(parsed.problems) == 1 and problem in parsed.problems[0], parsed.problems
    assert parsed.answer == "answer"
    if "<change>" in block:
        assert parsed.step.change == [Write(path=f"{CWD}/ok.txt", content="fine\n")]


def test_an_unclosed_block_ends_where_its_lines_do_and_says_so():
    """A model that forgot the closing tag: its ops are kept, the agent gets what follows."""
    parsed = parse_step("<change>\nrm a\nwrite b\n|x\nanswer text\n[exit code: 0]", CWD)
    assert parsed.problems == ["<change> is never closed"]
    assert parsed.answer == "answer text\n[exit code: 0]"
    assert parsed.step.change == [Remove(path=f"{CWD}/a"), Write(path=f"{CWD}/b", content="x\n")]


def test_blocks_only_count_at_the_start_of_an_answer():
    text = "some output\n<change>\nrm a\n</change>"
    parsed = parse_step(text, CWD)
    assert parsed.answer == text and parsed.step.change == [] and not parsed.had_blocks


def test_huge_content_is_kept_as_text_for_the_bookkeeping_to_limit():
    content = "y\n" * 50_000
    parsed = parse_step("<change>\nwrite big\n" + "|y\n" * 50_000 + "</change>\n", CWD)
    assert parsed.problems == []
    [op] = parsed.step.change
    assert isinstance(op, Write) and op.content == content


def test_blocks_written_twice_or_in_the_other_order_never_reach_the_agent():
    """A small model may write its blocks twice, or change before recall: every block at
    the start is taken off the answer; the first of each kind is read, a repeat is not."""
    twice = (
        "<recall>\nfile a.txt\n</recall>\n<change>\nmkdir out\n</change>\n"
        "<recall>\nfile b.txt\n</recall>\n<change>\nrm a.txt\n</change>\nhi\n[exit code: 0]"
    )
    parsed = parse_step(twice, "/p")
    assert parsed.answer == "hi\n[exit code: 0]"
    assert list(parsed.step.recall.paths) == ["/p/a.txt"]
    assert [op.op for op in parsed.step.change] == ["mkdir"]
    assert parsed.problems == [
        "a second <recall> block: left out of the answer, not read",
        "a second <change> block: left out of the answer, not read",
    ]
    swapped = parse_step(
        "<change>\nmkdir out\n</change>\n<recall>\nfile a.txt\n</recall>\nhi", "/p"
    )
    assert (swapped.answer, swapped.problems) == ("hi", [])
    assert list(swapped.step.recall.paths) == ["/p/a.txt"] and len(swapped.step.change) == 1
