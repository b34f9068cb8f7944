"""Domain files: the bundled Terminal domain, user files, and clear errors for broken ones."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from aw_mcp.domain.loader import load_domain
from aw_mcp.files.yaml import DataFileError

TINY = Path(__file__).parent / "data" / "tiny_domain.yaml"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "broken.yaml"
    path.write_text(textwrap.dedent(text))
    return path


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


def test_a_reserve_over_the_answer_budget_is_a_clear_error(tmp_path):
    path = write(
        tmp_path,
        """\
        name: greedy
        instructions: hi
        generation: {max_tokens: 128}
        tools:
          - name: t
            simulation: {reserved_tokens: 256}
        """,
    )
    with pytest.raises(DataFileError, match="'t': reserved_tokens 256 is more than the 128"):
        load_domain(str(path))


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


def test_a_misspelt_tool_key_is_an_error_not_silently_dropped(tmp_path):
    path = write(
        tmp_path,
        """\
        name: typo
        instructions: hi
        tools:
          - name: t
            inputschema: {type: object}
        """,
    )
    with pytest.raises(DataFileError) as err:
        load_domain(str(path))
    assert f"{path}:5: tools[0].inputschema: Extra inputs are not permitted" in str(err.value)


def test_a_bundled_name_is_not_hidden_by_a_folder_of_that_name(tmp_path, monkeypatch):
    (tmp_path / "terminal").mkdir()
    monkeypatch.chdir(tmp_path)
    assert load_domain("terminal").name == "terminal"


def test_a_character_yaml_forbids_names_file_and_line(tmp_path):
    # Found by tests/test_fuzz.py: PyYAML's reader refused it before the parse even began.
    path = tmp_path / "control.yaml"
    path.write_text("name: x\ninstructions: a\x1fb\ntools: []\n")
    with pytest.raises(DataFileError) as err:
        load_domain(str(path))
    assert str(err.value) == f"{path}:2: invalid YAML: character 0x1f is not allowed in YAML"


def test_a_file_that_is_not_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("name: x\ninstructions: caf\u00e9\n".encode("latin-1"))
    with pytest.raises(DataFileError) as err:
        load_domain(str(path))
    assert str(err.value) == f"{path}:2: not UTF-8 text: byte 0xe9 at offset 25"


@pytest.mark.filterwarnings("error::DeprecationWarning")
def test_an_unknown_schema_url_validates_with_the_latest_draft(tmp_path):
    # jsonschema warns that an unknown $schema "will raise an error in the future"; captured
    # tools carry all sorts of them, so the latest draft is chosen explicitly.
    from aw_mcp.json_schemas import schema_errors

    path = write(
        tmp_path,
        """\
        name: custom
        instructions: x
        tools:
          - name: t
            inputSchema:
              $schema: https://example.com/my-own-draft
              type: object
              properties: {n: {type: integer}}
        """,
    )
    schema = load_domain(str(path)).tool("t").input_schema
    assert schema_errors(schema, {"n": "one"}) == ["n: 'one' is not of type 'integer'"]
