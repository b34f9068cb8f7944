"""Domain files: the bundled Terminal domain, user files, and clear errors for broken ones."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from aw_mcp.domain import load_domain
from aw_mcp.yaml_files import DataFileError
from tests.conftest import SHARED_DIR

TINY = Path(__file__).parent / "data" / "tiny_domain.yaml"


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip().splitlines()]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "broken.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_terminal_domain_serves_desktop_commander_schemas_unchanged():
    domain = load_domain("terminal")
    capture = SHARED_DIR / "tool-surfaces" / "desktop-commander.json"
    if not capture.exists():
        pytest.skip("shared/tool-surfaces is not beside this checkout")
    real = {t["name"]: t for t in json.loads(capture.read_text())["tools"]}
    mirrored = [t for t in domain.tools if t.name in real]
    assert len(mirrored) >= 15
    for tool in mirrored:
        assert tool.input_schema == real[tool.name]["inputSchema"], tool.name
        # Same text; only trailing spaces at line ends are lost to YAML block style.
        assert _lines(tool.description) == _lines(real[tool.name]["description"]), tool.name
    assert domain.tool("run_command") is not None  # the plain command tool beside them


def test_a_users_domain_file_loads_by_path():
    domain = load_domain(str(TINY))
    assert domain.name == "tiny"
    assert [t.name for t in domain.tools] == ["run_command", "read_file"]
    assert domain.tool("read_file").read_only


def test_yaml_syntax_error_names_file_and_line(tmp_path):
    path = write(
        tmp_path,
        """\
        name: broken
        instructions: hi
        tools:
          - name: a
            inputSchema: {type: object
        """,
    )
    with pytest.raises(DataFileError) as err:
        load_domain(str(path))
    message = str(err.value)
    assert str(path) in message
    assert ":6:" in message or ":5:" in message
    assert "invalid YAML" in message


def test_validation_error_names_line_and_field(tmp_path):
    path = write(
        tmp_path,
        """\
        name: broken
        instructions: hi
        tools:
          - name: fine
          - name: "bad name with spaces"
            description: the name breaks the pattern
        """,
    )
    with pytest.raises(DataFileError) as err:
        load_domain(str(path))
    message = str(err.value)
    assert f"{path}:5: tools[1].name:" in message


def test_an_invalid_input_schema_is_rejected_with_its_line(tmp_path):
    path = write(
        tmp_path,
        """\
        name: broken
        instructions: hi
        tools:
          - name: t
            inputSchema:
              type: object
              properties:
                x: {type: 12}
        """,
    )
    with pytest.raises(DataFileError) as err:
        load_domain(str(path))
    assert f"{path}:6: tools[0].inputSchema:" in str(err.value)
    assert "not a valid JSON Schema" in str(err.value)


def test_missing_required_field_and_unknown_key(tmp_path):
    path = write(
        tmp_path,
        """\
        name: broken
        tools:
          - name: t
        instructionz: typo
        """,
    )
    with pytest.raises(DataFileError) as err:
        load_domain(str(path))
    message = str(err.value)
    assert "instructions: Field required" in message
    assert f"{path}:4: instructionz: Extra inputs are not permitted" in message


def test_unknown_bundled_name_lists_the_bundled_ones():
    with pytest.raises(DataFileError) as err:
        load_domain("no-such-world")
    assert "terminal" in str(err.value)


def test_serve_refuses_a_broken_domain_file_at_startup(tmp_path):
    path = write(tmp_path, "name: broken\ninstructions: hi\ntools: []\n")
    proc = subprocess.run(
        [sys.executable, "-m", "aw_mcp", "serve", "--simulator", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2
    assert f"{path}:3: tools:" in proc.stderr
    assert proc.stdout == ""  # stdout is the MCP wire; nothing else may go there
