"""`aw-mcp view`: the HTML report of a record dir (structure; the browser test loads it)."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from aw_mcp.cli import main
from aw_mcp.records.reader import load_record_dir
from aw_mcp.state.steps import Append, PathState, Recall, Remove, StepState
from aw_mcp.state.text import render_change, render_recall
from aw_mcp.viewer.episodes import bar_chart, episode_views
from aw_mcp.viewer.render import render_page
from tests.conftest import REPO_ROOT
from tests.viewer_support import call, fault, real_counterpart, simulated_record_dir, write_records


class Elements(HTMLParser):
    """Tags with their attributes, and the page's text."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(html: str) -> Elements:
    parser = Elements()
    parser.feed(html)
    return parser


def step_items(html: str) -> list[dict[str, str | None]]:
    """The attributes of each step of the timelines (``<li class="step ...">``)."""
    return [
        attrs
        for tag, attrs in parse(html).tags
        if tag == "li" and "step" in (attrs.get("class") or "").split()
    ]


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = simulated_record_dir(tmp_path_factory.mktemp("records"))
    real_counterpart(directory / "real")
    return directory


def test_every_step_is_on_the_page_with_its_details(records: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    assert main(["view", str(records), "--out", str(out)]) == 0
    page = parse(out.read_text())
    steps = step_items(out.read_text())
    episodes = load_record_dir(records)
    assert len(steps) == sum(len(e.records) for e in episodes) == 11
    sources = [a["data-source"] for a in steps]
    for source in ("model", "replay", "fault", "rpc-error", "invalid-arguments", "real"):
        assert source in sources
    assert [a["data-error"] for a in steps if a["data-source"] == "fault"] == ["1"]
    text = "".join(page.text)
    assert "fault viewer-test/third-search-502: error" in text
    assert "world: The disk is full." in text  # the condition in effect on calls 5 and 6
    assert "502 Bad Gateway" in text


def test_the_page_needs_nothing_from_the_network(records: Path) -> None:
    html = render_page(episode_views(load_record_dir(records)), "t")
    tags = parse(html).tags
    assert not [a for tag, a in tags if tag in ("script", "img", "iframe") and a.get("src")]
    assert not [tag for tag, _ in tags if tag == "link"]
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)
    assert "@import" not in html and "url(" not in html


def test_recorded_text_is_escaped(tmp_path: Path) -> None:
    write_records(
        tmp_path,
        [call(1, "run", {"cmd": "<b>x</b>"}, observation="<script>alert(1)</script>")],
    )
    html = render_page(episode_views(load_record_dir(tmp_path)), "<title>")
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;title&gt;" in html


def test_a_closed_loop_episode_is_shown_beside_its_real_one(records: Path) -> None:
    views = {v.episode: v for v in episode_views(load_record_dir(records))}
    paired = views["closed-loop/shop-1"]
    assert paired.counterpart is not None
    assert [p.index for p in paired.counterpart] == [1, 2, 3, 4, 5, 6]
    assert paired.counterpart[0].same_action and not paired.counterpart[0].same_observation
    assert paired.counterpart[4].real is None  # the real episode made four calls
    assert views["shop-2"].counterpart is None
    assert views["shop-1"].counterpart is None  # the real one itself


def test_real_episodes_from_another_dir(tmp_path: Path) -> None:
    write_records(tmp_path / "sim", [call(1, "search", {"q": "a"}, episode="t-1")])
    write_records(tmp_path / "real", [call(1, "search", {"q": "a"}, episode="t-1",
                                           source="real", observation="real text")])  # fmt: skip
    out = tmp_path / "r.html"
    assert main(["view", str(tmp_path / "sim"), "--real", str(tmp_path / "real"),
                 "--out", str(out)]) == 0  # fmt: skip
    html = out.read_text()
    assert "side by side with the real episode" in html and "real text" in html
    # only the simulated dir's episodes get a timeline of their own
    assert len(re.findall(r'<section class="episode"', html)) == 1


def test_charts_scale_to_the_largest_value() -> None:
    chart = bar_chart("latency", [0.5, 2.0, 0.0], "s")
    assert [b.height for b in chart.bars] == [15.0, 60.0, 0.0]
    assert chart.peak == "2 s"
    assert bar_chart("empty", [], "s").bars == []


def test_fault_marks_and_charts_are_svg(tmp_path: Path) -> None:
    write_records(
        tmp_path,
        [
            call(1, "a", tokens=(100, 20), seconds=0.4),
            call(2, "a", faults=[fault()], source="fault", is_error=True, seconds=0.0),
            call(3, "b", tokens=(150, 30), seconds=0.8),
        ],
    )
    page = parse(render_page(episode_views(load_record_dir(tmp_path)), "t"))
    rects = [a for tag, a in page.tags if tag == "rect"]
    assert len(rects) == 6  # latency and tokens, three steps each
    assert [float(a["height"]) for a in rects[3:]] == [40.0, 0.0, 60.0]  # 120, 0, 180 tokens
    assert len([a for tag, a in page.tags if tag == "circle"]) == 1


def test_real_trajectories_render(tmp_path: Path) -> None:
    out = tmp_path / "heldout.html"
    heldout = REPO_ROOT / "tests" / "data" / "real_terminal"
    assert main(["view", str(heldout), "--out", str(out)]) == 0
    html = out.read_text()
    assert html.count('class="episode"') == len(load_record_dir(heldout))


def test_missing_or_empty_dirs_are_clear_errors(tmp_path: Path, capsys) -> None:
    assert main(["view", str(tmp_path / "nope")]) == 2
    assert "no record directory" in capsys.readouterr().err
    assert main(["view", str(tmp_path)]) == 2
    assert "no records" in capsys.readouterr().err


# --- state ------------------------------------------------------------------------------------

CWD = "/home/dev"
VIEW = "<state>\ncwd /home/dev\ndir .\n|notes.txt\nfile notes.txt\n1|buy tea\n</state>"


def read_notes(content: str = "buy tea\n") -> Recall:
    return Recall(paths={f"{CWD}/notes.txt": PathState(kind="file", content=content)})


def appended(text: str = "pay rent\n") -> list:
    return [Append(path=f"{CWD}/notes.txt", text=text)]


def state_panels(html: str) -> list[dict[str, str | None]]:
    return [a for tag, a in parse(html).tags if tag == "details" and a.get("class") == "state"]


def state_marks(html: str) -> list[str]:
    """Everything of the page's episodes (not its inline style) that belongs to a state."""
    episodes = parse(html.split("<main>")[1].split("</main>")[0])
    marks = [
        word
        for _, attrs in episodes.tags
        for word in (attrs.get("class") or "").split()
        if word.startswith(("state", "verdict"))
    ]
    text = "".join(episodes.text)
    return marks + [w for w in ("state problem", "view given", "state:") if w in text]


def test_a_step_with_state_shows_its_view_and_blocks_collapsed(tmp_path: Path) -> None:
    step = StepState(cwd=CWD, recall=read_notes(), change=appended())
    write_records(tmp_path, [call(1, "run_command", {"command": "cat notes.txt"},
                                  state=step, view=VIEW)])  # fmt: skip
    html = render_page(episode_views(load_record_dir(tmp_path)), "t")
    text = "".join(parse(html).text)
    recall, change = render_recall(step.recall, CWD), render_change(step.change, CWD)
    assert recall.startswith("<recall>\nfile notes.txt\n1|buy tea")  # the long form
    assert recall in text and change in text and VIEW in text
    assert "view given to the model" in text and "cwd /home/dev" in text
    assert [("open" in a) for a in state_panels(html)] == [False]  # collapsed
    marks = state_marks(html)
    assert "state-view" in marks and "state-problems" not in marks


def test_a_step_that_read_and_changed_nothing_says_so(tmp_path: Path) -> None:
    write_records(tmp_path, [call(1, "run_command", state=StepState(cwd=CWD), view=VIEW)])
    html = render_page(episode_views(load_record_dir(tmp_path)), "t")
    assert "read and changed nothing" in "".join(parse(html).text)


def test_problems_of_the_models_blocks_are_shown_outside_the_fold(tmp_path: Path) -> None:
    problems = ["'frob x': unknown change line 'frob'", "<change> is never closed"]
    step = StepState(cwd=CWD, change=appended(), problems=problems)
    write_records(tmp_path, [call(1, "run_command", state=step)])
    html = render_page(episode_views(load_record_dir(tmp_path)), "t")
    page = parse(html)
    text = "".join(page.text)
    assert ("ul", {"class": "state-problems"}) in page.tags
    for problem in problems:
        assert f"state problem: {problem}" in text
    assert "2 problems" in text  # on the panel's summary too
    assert "view given to the model" not in text  # this record keeps no view


def test_state_text_is_escaped(tmp_path: Path) -> None:
    step = StepState(
        cwd=CWD,
        recall=read_notes("<script>alert(1)</script>\n"),
        change=appended("<img src=x onerror=alert(2)>\n"),
        problems=["<b>bad</b> line"],
    )
    write_records(tmp_path, [call(1, "run_command", state=step, view="<iframe>view</iframe>")])
    html = render_page(episode_views(load_record_dir(tmp_path)), "t")
    for raw in ("<script>alert(1)", "<img src=x", "<b>bad</b>", "<iframe>", "<recall>", "<state>"):
        assert raw not in html
    assert "1|&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "|&lt;img src=x onerror=alert(2)&gt;" in html
    assert "&lt;b&gt;bad&lt;/b&gt; line" in html and "&lt;iframe&gt;view&lt;/iframe&gt;" in html
    assert not [tag for tag, _ in parse(html).tags if tag in ("img", "iframe", "b")]


def test_a_step_without_state_shows_no_state(tmp_path: Path) -> None:
    write_records(tmp_path, [call(1, "search", {"q": "a"}), call(2, "search", {"q": "b"})])
    views = episode_views(load_record_dir(tmp_path))
    assert [s.state for s in views[0].steps] == [None, None]
    html = render_page(views, "t")
    assert len(step_items(html)) == 2
    assert state_marks(html) == []


def test_beside_its_real_episode_each_step_gets_a_state_verdict(tmp_path: Path) -> None:
    real = [
        StepState(cwd=CWD, recall=read_notes()),
        StepState(cwd=CWD, change=appended()),
        StepState(cwd=CWD, change=[Remove(path=f"{CWD}/notes.txt")]),
        None,  # a real step recorded before state was
    ]
    said = [
        StepState(cwd=CWD, recall=Recall(paths={f"{CWD}/notes.txt": PathState(kind="file")})),
        StepState(cwd=CWD, change=appended("pay the rent\n")),  # a different text
        None,  # a model that keeps no state said nothing
        StepState(cwd=CWD),
    ]
    for folder, episode, source, states in (
        ("real", "t-1", "real", real),
        ("sim", "closed-loop/t-1", "model", said),
    ):
        records = [
            call(i, "run_command", {"n": i}, episode=episode, source=source, state=state)
            for i, state in enumerate(states, start=1)
        ]
        write_records(tmp_path / folder, records)
    views = episode_views(load_record_dir(tmp_path / "sim"), load_record_dir(tmp_path / "real"))
    assert views[0].counterpart is not None
    matches = [p.state_match for p in views[0].counterpart]
    assert [(m.recall, m.change) if m else None for m in matches] == [
        (True, True),  # the same path as the same kind: the compact form names no content
        (True, False),
        (True, False),
        None,
    ]
    html = render_page(views, "t")
    cells = re.findall(r'<td class="state-col">(.*?)</td>', html, re.S)
    words = [" ".join(re.sub(r"<[^>]+>", " ", c).split()) for c in cells]
    assert words == [
        "recall match change match",
        "recall match change differs",
        "recall match change differs",
        "(no real state)",
    ]
    text = " ".join("".join(parse(html).text).split())
    assert "state: recall matches on 3 of 3 steps, change on 1" in text


def test_without_real_states_the_side_by_side_has_no_state_column(records: Path) -> None:
    html = render_page(episode_views(load_record_dir(records)), "t")
    assert "side by side with the real episode" in html
    assert state_marks(html) == []
