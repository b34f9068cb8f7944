"""A mistake in how `aw-mcp` is started ends in one clear line (exit status 2), never in a
traceback, and before anything starts (no model load, no "serving on")."""

from __future__ import annotations

import argparse
import json
import socket
import subprocess

import pytest

from aw_mcp.cli import build_parser
from aw_mcp.domain.mirror import load_tools_file
from aw_mcp.files.yaml import DataFileError
from tests.helpers import TINY_DOMAIN
from tests.http_support import SERVE


def serve(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*SERVE, "--simulator", str(TINY_DOMAIN), *args],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def assert_refused(result: subprocess.CompletedProcess, *phrases: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    for phrase in phrases:
        assert phrase in result.stderr, result.stderr


def test_a_record_dir_that_is_a_file(tmp_path):
    target = tmp_path / "records"
    target.write_text("not a folder")
    assert_refused(serve("--record-dir", str(target)), f"cannot keep records in {target}", "file")


@pytest.mark.parametrize(
    ("flag", "phrase"),
    [("--grounding", "--grounding {}: no such folder"), ("--replay", "no record directory at {}")],
)
def test_a_missing_record_folder(tmp_path, flag, phrase):
    missing = tmp_path / "nowhere"
    assert_refused(serve(flag, str(missing)), phrase.format(missing))


def test_a_port_out_of_range():
    result = serve("--transport", "http", "--port", "99999")
    assert_refused(
        result, "invalid settings", "--port: Input should be less than or equal to 65535"
    )


def test_a_port_in_use_fails_before_the_model_loads_or_anything_says_serving():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = serve("--transport", "http", "--port", str(port))
    assert_refused(result, f"cannot listen on 127.0.0.1:{port}", "--port")
    assert "serving Streamable HTTP" not in result.stderr and "loaded" not in result.stderr


def test_an_unknown_flag_gets_did_you_mean(capsys):
    with pytest.raises(SystemExit) as exited:
        from aw_mcp.cli import main

        main(["serve", "--simulater", "terminal"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "unrecognized arguments: --simulater terminal (did you mean --simulator?)" in err
    assert "aw-mcp serve: error" in err  # the usage of the command that was given


def test_a_type_error_in_a_tools_from_file_names_its_line(tmp_path):
    capture = tmp_path / "tools.json"
    tools = [
        {"name": "ok", "inputSchema": {"type": "object"}},
        {"name": "bad", "description": 5, "inputSchema": {"type": "object"}},
    ]
    capture.write_text(json.dumps({"tools": tools}, indent=2))
    with pytest.raises(DataFileError) as failed:
        load_tools_file(capture)
    line = capture.read_text().splitlines().index('      "description": 5,') + 1
    assert f"{capture}:{line}: tools[1].description (tool 'bad'): Input should be" in str(
        failed.value
    )


def _subcommand(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


@pytest.mark.parametrize("command", ["train", "serve", "capture", "client-config"])
def test_every_flag_has_help_text(command):
    missing = [
        action.option_strings or [action.dest]
        for action in _subcommand(command)._actions
        if not isinstance(action, argparse._HelpAction)
        and not (action.help or "").split("(default")[0].strip()
    ]
    assert missing == []
