"""Each setting is defined once (config.ServeSettings): flags, help and README come from it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from aw_mcp.cli import build_parser
from aw_mcp.commands.flags import flag_name, settings_table
from aw_mcp.wiring.settings import ServeSettings

README = Path(__file__).resolve().parents[1] / "README.md"


def _serve_help() -> str:
    parser = build_parser()
    serve = parser._subparsers._group_actions[0].choices["serve"]  # type: ignore[union-attr]
    return serve.format_help()


def test_every_setting_is_a_serve_flag_and_every_serve_flag_a_setting():
    flags = set(re.findall(r"--[a-z][a-z0-9-]+", _serve_help())) - {"--help"}
    booleans = {n for n, f in ServeSettings.model_fields.items() if f.annotation is bool}
    # On/off settings get a --no- form too, unless they are a negation already (--no-lora).
    negations = {"--no-" + flag_name(n)[2:] for n in booleans if not n.startswith("no_")}
    assert negations <= flags
    assert flags - negations == {flag_name(n) for n in ServeSettings.model_fields}


def test_flags_override_environment_and_defaults(monkeypatch):
    monkeypatch.setenv("AW_MCP_N_CTX", "1024")
    monkeypatch.setenv("AW_MCP_PORT", "9000")
    args = build_parser().parse_args(
        [
            "serve",
            "--n-ctx",
            "2048",
            "--simulator",
            "web",
            "--simulator",
            "search",
            "--no-replay-read-only",
        ]
    )
    from aw_mcp.commands.flags import settings_from_namespace

    settings = settings_from_namespace(ServeSettings, args)
    assert settings.n_ctx == 2048  # flag over env
    assert settings.port == 9000  # env over default
    assert settings.simulator == ["web", "search"]  # repeatable
    assert settings.replay_read_only is False
    assert settings.threads is None  # unset flag: the default stays


def test_choices_and_types_come_from_the_field_types():
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--engine", "nonsense"])
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--port", "eighty"])


def test_readme_table_is_the_generated_one():
    text = README.read_text(encoding="utf-8")
    block = re.search(r"<!-- settings:start -->\n(.*?)\n<!-- settings:end -->", text, re.S)
    assert block, "README has no generated settings table"
    assert block.group(1).strip() == settings_table(ServeSettings), (
        "README's settings table is stale: regenerate it with "
        "python -c 'from aw_mcp.commands.flags import settings_table; "
        "from aw_mcp.wiring.settings import ServeSettings; print(settings_table(ServeSettings))'"
    )
