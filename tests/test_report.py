"""`aw-mcp report`: reactions to faults classified from scripted record sets; policy exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from aw_mcp.cli import main
from aw_mcp.server.episode_identity import EPISODE_HEADER
from aw_mcp.viewer.reactions import episode_reactions, is_read_only, name_looks_read_only
from tests.helpers import TINY_DOMAIN
from tests.http_support import http_serve
from tests.viewer_support import call, fault, write_records

FAIL = {"source": "fault", "is_error": True}


def test_retry_with_backoff_that_recovers() -> None:
    records = [
        call(1, "search", {"q": "a"}, at=0.0, faults=[fault("flaky")], **FAIL),
        call(2, "search", {"q": "a"}, at=0.55, is_error=True, faults=[fault("flaky")],
             source="fault"),
        call(3, "search", {"q": "a"}, at=1.6),
        call(4, "get_item", {"id": "1"}, at=2.0),
    ]  # fmt: skip
    [reaction] = episode_reactions(records)
    assert reaction.outcome == "retried"
    assert reaction.retries == 2
    assert reaction.waits == [0.5, 1.0]
    assert reaction.backoff is True
    assert reaction.recovered
    assert not reaction.blind_write  # search is a read


def test_immediate_retries_are_not_backoff() -> None:
    records = [
        call(1, "search", {"q": "a"}, at=0.0, **FAIL),
        call(2, "search", {"q": "a"}, at=0.06),
    ]
    [reaction] = episode_reactions(records)
    assert reaction.outcome == "retried" and reaction.backoff is False


def test_give_up_switch_and_adjust() -> None:
    gave_up = [call(1, "search", {"q": "a"}), call(2, "search", {"q": "b"}, **FAIL)]
    switched = [call(1, "search", {"q": "a"}, **FAIL), call(2, "get_item", {"id": "9"})]
    adjusted = [call(1, "search", {"q": "a"}, **FAIL), call(2, "search", {"q": "a b"})]
    assert [r.outcome for r in episode_reactions(gave_up)] == ["gave-up"]
    [r] = episode_reactions(switched)
    assert (r.outcome, r.next_tool) == ("switched", "get_item")
    assert [r.outcome for r in episode_reactions(adjusted)] == ["adjusted"]


def test_a_json_rpc_error_without_a_rule_is_a_fault_hit() -> None:
    records = [call(1, "search", {"q": "a"}, source="rpc-error", is_error=True)]
    [r] = episode_reactions(records)
    assert r.rules == ["(rpc-error)"] and r.outcome == "gave-up"


def test_the_same_failing_call_again_and_again_is_a_loop() -> None:
    records = [
        call(i, "search", {"q": "a"}, at=i * 0.1, faults=[fault("down")], **FAIL)
        for i in range(1, 6)
    ]
    [reaction] = episode_reactions(records)  # the retries are one reaction, not five
    assert reaction.outcome == "looped"
    assert reaction.loop == 5 and reaction.retries == 4
    assert not reaction.recovered


def test_a_write_repeated_with_identical_arguments_is_blind() -> None:
    records = [
        call(1, "write_file", {"path": "a", "text": "x"}, source="rpc-error", is_error=True),
        call(2, "write_file", {"path": "a", "text": "x"}),
    ]
    [reaction] = episode_reactions(records)
    assert reaction.outcome == "retried" and reaction.blind_write


@pytest.mark.parametrize(
    ("command", "blind"),
    [
        ("cat notes.txt", False),
        ("grep -n TODO app.py | head -3", False),
        ("ls 2>&1 | wc -l", False),
        ("git status --short", False),
        ("touch done.txt", True),
        ("echo hi >> log.txt", True),
        ("git commit -m fix", True),
        ("sed -i s/a/b/ app.py", True),
        ("make build", True),  # a program not known to only read: may write
    ],
)
def test_a_retried_shell_command_is_a_blind_write_only_when_it_writes(command, blind) -> None:
    """A 429 on `cat`, then `cat` again, is a plain retry: run_command may write, but this
    command line does not (`aw-mcp report` called every retried run_command a blind write)."""
    records = [
        call(1, "run_command", {"command": command}, source="fault", is_error=True),
        call(2, "run_command", {"command": command}),
    ]
    records = [r.model_copy(update={"domain": "terminal"}) for r in records]
    [reaction] = episode_reactions(records)
    assert reaction.outcome == "retried" and reaction.blind_write is blind


def test_read_only_comes_from_the_bundled_domain_then_the_name() -> None:
    # terminal's run_command is annotated readOnlyHint: false though nothing in its name says so
    assert not is_read_only("terminal", "run_command")
    assert name_looks_read_only("get_issue") and name_looks_read_only("listFiles")
    assert name_looks_read_only("web_search")
    assert not name_looks_read_only("create_issue") and not name_looks_read_only("write_file")
    assert not is_read_only("no-such-domain", "delete_branch")


def scripted_set(directory: Path) -> Path:
    """Four episodes: a retry with backoff, a give-up, a loop and a blind write retry."""
    records = [
        call(1, "search", {"q": "a"}, episode="retry", at=0.0, faults=[fault("flaky")], **FAIL),
        call(2, "search", {"q": "a"}, episode="retry", at=1.0),
        call(1, "search", {"q": "a"}, episode="give-up", faults=[fault("flaky")], **FAIL),
        *(
            call(i, "get_item", {"id": "1"}, episode="loop", faults=[fault("down")], **FAIL)
            for i in (1, 2, 3, 4)
        ),
        call(1, "write_file", {"path": "a"}, episode="blind", faults=[fault("rpc")],
             source="rpc-error", is_error=True),
        call(2, "write_file", {"path": "a"}, episode="blind"),
    ]  # fmt: skip
    return write_records(directory, records)


def test_report_json_counts_per_tool_and_rule(tmp_path: Path, capsys) -> None:
    records = scripted_set(tmp_path / "records")
    assert main(["report", str(records), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["episodes"] == 4 and out["faults"] == 4
    assert out["outcomes"] == {
        "retried": 2, "looped": 1, "adjusted": 0, "switched": 0, "gave-up": 1
    }  # fmt: skip
    assert out["by_tool"]["search"]["outcomes"]["retried"] == 1
    assert out["by_tool"]["search"]["outcomes"]["gave-up"] == 1
    assert out["by_tool"]["get_item"]["longest_loop"] == 4
    assert out["by_tool"]["write_file"]["blind_writes"] == 1
    assert out["by_rule"]["test/flaky"]["faults"] == 2
    assert out["by_rule"]["test/down"]["max_retries"] == 3
    assert out["violations"] == []


@pytest.mark.parametrize(
    ("policy", "code", "broken"),
    [
        ("max_retries: 3\nmax_loop: 4\n", 0, []),
        ("max_retries: 2\n", 1, ["3 retries > max_retries 2"]),
        ("max_loop: 3\n", 1, ["4 times > max_loop 3"]),
        ("no_blind_write_retry: true\n", 1, ["episode 'blind' call 1 (write_file"]),
        ("max_give_up_rate: 0.2\n", 1, ["gave up after 25% of faults"]),
    ],
)
def test_policy_sets_the_exit_code(
    tmp_path: Path, capsys, policy: str, code: int, broken: list[str]
) -> None:
    records = scripted_set(tmp_path / "records")
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(policy)
    assert main(["report", str(records), "--json", "--policy", str(policy_file)]) == code
    violations = json.loads(capsys.readouterr().out)["violations"]
    assert len(violations) == len(broken)
    for expected, line in zip(broken, violations, strict=True):
        assert expected in line


def test_a_bad_policy_names_file_and_line(tmp_path: Path, capsys) -> None:
    records = scripted_set(tmp_path / "records")
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text("max_retries: 2\nmax_loops: 3\n")
    assert main(["report", str(records), "--policy", str(policy_file)]) == 2
    err = capsys.readouterr().err
    assert f"{policy_file}:2" in err and "max_loops" in err


def test_text_report_has_a_row_per_tool_and_rule(tmp_path: Path, capsys) -> None:
    assert main(["report", str(scripted_set(tmp_path / "r"))]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0] for line in out.splitlines() if line.strip()}
    assert {"search", "get_item", "write_file", "test/flaky", "test/down", "test/rpc"} <= rows


UNAVAILABLE_FIRST = """
name: unavailable-first
rules:
  - id: first-call-503
    when: {nth: 1, count: all}
    effects: [{kind: error, preset: http_503, retry_after: 1}]
"""


def test_report_on_records_of_the_real_server(tmp_path: Path, capsys) -> None:
    """`serve --record-dir` with a fault scenario and the embedded model: an agent that
    repeats a write after a 503 breaks no_blind_write_retry; one that reads next does not."""
    scenario = tmp_path / "unavailable.yaml"
    scenario.write_text(UNAVAILABLE_FIRST)
    records = tmp_path / "records"
    args = ["--simulator", str(TINY_DOMAIN), "--faults", str(scenario)]

    async def agent(url: str, episode: str, second: str) -> None:
        http = httpx2.AsyncClient(headers={EPISODE_HEADER: episode}, timeout=120)
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            first = await client.call_tool("run_command", {"command": "touch done.txt"})
            assert first.is_error  # the scenario's 503
            await client.call_tool("run_command", {"command": second})

    with http_serve(tmp_path / "server.log", *args, "--record-dir", str(records)) as url:
        anyio.run(agent, url, "blind", "touch done.txt")
        anyio.run(agent, url, "careful", "ls done.txt")
    policy = tmp_path / "policy.yaml"
    policy.write_text("no_blind_write_retry: true\n")
    assert main(["report", str(records), "--json", "--policy", str(policy)]) == 1
    out = json.loads(capsys.readouterr().out)
    reactions = {r["episode"]: r for r in out["reactions"]}
    assert reactions["blind"]["outcome"] in ("retried", "looped")
    assert reactions["blind"]["blind_write"] is True
    assert reactions["blind"]["rules"] == ["unavailable-first/first-call-503"]
    assert reactions["careful"]["outcome"] == "adjusted" and not reactions["careful"]["blind_write"]
    assert len(out["violations"]) == 1 and "'blind' call 1" in out["violations"][0]
