"""``aw-mcp client-config``: the MCP client configuration of one named client.

No one file suits every client (README, "Connecting a client"): langchain-mcp-adapters
passes every key but ``transport`` to its session, so a ``type`` key fails there; the
Inspector and Claude Code read an entry without ``type`` as stdio; VS Code wants
``servers``, not ``mcpServers``; Claude Desktop's file starts stdio servers only. So each
client gets its own entry, in the shape that client reads:

==============  ============  =====================================  ===========================
client          servers key   stdio entry                            HTTP entry
==============  ============  =====================================  ===========================
inspector       mcpServers    type stdio, command, args, env         type streamable-http, url
langchain       mcpServers    transport stdio, command, args, env    transport http, url
pydantic-ai     mcpServers    command, args, env                     url
claude-desktop  mcpServers    command, args, env                     (none: stdio only)
cursor          mcpServers    command, args, env                     url
vscode          servers       type stdio, command, args, env         type http, url
claude-code     mcpServers    type stdio, command, args, env         type http, url
==============  ============  =====================================  ===========================

HTTP entries carry ``headers`` when ``--header`` is given.
"""

from __future__ import annotations

import argparse
import difflib
import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aw_mcp.errors import UserInputError


@dataclass(frozen=True)
class ClientFormat:
    """How one client reads a server entry."""

    title: str
    servers_key: str
    stdio: dict[str, str]  # the keys that mark an entry as stdio ({} when none is needed)
    http: dict[str, str] | None  # the keys that mark an entry as HTTP; None: no HTTP entry
    where: str  # the file the client reads (a hint on stderr)


CLIENTS: dict[str, ClientFormat] = {
    "inspector": ClientFormat(
        "the MCP Inspector",
        "mcpServers",
        {"type": "stdio"},
        {"type": "streamable-http"},
        "any file: mcp-inspector --config FILE --server NAME",
    ),
    "langchain": ClientFormat(
        "langchain-mcp-adapters",
        "mcpServers",
        {"transport": "stdio"},
        {"transport": "http"},
        'MultiServerMCPClient(json.load(open(FILE))["mcpServers"])',
    ),
    "pydantic-ai": ClientFormat(
        "pydantic-ai",
        "mcpServers",
        {},
        {},
        "pydantic_ai.mcp.load_mcp_toolsets(FILE)",
    ),
    "claude-desktop": ClientFormat(
        "Claude Desktop",
        "mcpServers",
        {},
        None,
        "claude_desktop_config.json (Settings > Developer > Edit Config)",
    ),
    "cursor": ClientFormat(
        "Cursor", "mcpServers", {}, {}, ".cursor/mcp.json in a project, or ~/.cursor/mcp.json"
    ),
    "vscode": ClientFormat(
        "VS Code",
        "servers",
        {"type": "stdio"},
        {"type": "http"},
        ".vscode/mcp.json in a workspace, or the user mcp.json (MCP: Open User Configuration)",
    ),
    "claude-code": ClientFormat(
        "Claude Code", "mcpServers", {"type": "stdio"}, {"type": "http"}, ".mcp.json in a project"
    ),
}


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "client-config",
        help="the MCP client configuration of one client (Inspector, langchain, pydantic-ai, "
        "Claude Desktop, Cursor, VS Code, Claude Code)",
        description="Print (or write with -o) the configuration file that one MCP client reads, "
        "with one entry for aw-mcp in that client's own shape. Options of aw-mcp serve go "
        "after --, for a stdio entry: aw-mcp client-config --client vscode --absolute -- "
        "--world /abs/world.yaml --episode my-run. Give file paths absolute: a client may "
        "start the server in another directory.",
    )
    p.add_argument("--client", required=True, choices=list(CLIENTS), help="the client to configure")
    p.add_argument(
        "--transport",
        choices=["stdio", "http"],
        default="stdio",
        help="stdio: the client starts aw-mcp serve itself (default); http: it connects to a "
        "server you started with aw-mcp serve --transport http",
    )
    p.add_argument(
        "--url", help="http: the server's URL (default: serve's, http://127.0.0.1:8765/mcp)"
    )
    p.add_argument(
        "--name", default="aw-mcp", help="the server's name in the file (default aw-mcp)"
    )
    p.add_argument(
        "--absolute",
        action="store_true",
        help="stdio: the absolute path of this aw-mcp as the command (IDE clients do not "
        "inherit a virtual environment's PATH)",
    )
    p.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="stdio: environment of the server process; repeatable",
    )
    p.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="http: a header on every request (Aw-Episode-Id, Authorization); repeatable",
    )
    p.add_argument(
        "-o",
        "--out",
        type=Path,
        metavar="FILE",
        help="write FILE instead of printing; an existing FILE keeps its other servers and keys",
    )
    p.add_argument(
        "serve_args",
        nargs=argparse.REMAINDER,
        metavar="-- SERVE OPTIONS",
        help="stdio: options of aw-mcp serve for the entry's command line",
    )
    p.set_defaults(handler=_client_config)


def _client_config(args: argparse.Namespace) -> int:
    client = CLIENTS[args.client]
    serve_args = args.serve_args[1:] if args.serve_args[:1] == ["--"] else args.serve_args
    if args.transport == "http":
        entry = http_entry(client, args.url or default_url(), args.header)
        for given, flag in ((serve_args, "serve options after --"), (args.env, "--env")):
            if given:
                raise UserInputError(
                    f"{flag} belong to a stdio entry; over HTTP give them to the server you "
                    "start: aw-mcp serve --transport http ..."
                )
        if args.absolute:
            raise UserInputError("--absolute is for a stdio entry (its command)")
    else:
        for given, flag in ((args.url, "--url"), (args.header, "--header")):
            if given:
                raise UserInputError(f"{flag} is for an HTTP entry: add --transport http")
        entry = stdio_entry(client, serve_args, _environment(args.env), absolute=args.absolute)
    config = {client.servers_key: {args.name: entry}}
    if args.out is None:
        print(json.dumps(config, indent=2))
    else:
        kept = write_config(args.out, client.servers_key, args.name, entry)
        more = f" (kept {kept} other server{'s' * (kept != 1)})" if kept else ""
        print(f"wrote {args.name!r} to {args.out}{more}", file=sys.stderr)
    print(f"{client.title} reads: {client.where}", file=sys.stderr)
    if args.transport == "http":
        print("start the server first: aw-mcp serve --transport http", file=sys.stderr)
    return 0


def stdio_entry(
    client: ClientFormat, serve_args: list[str], env: dict[str, str], *, absolute: bool = False
) -> dict[str, Any]:
    """An entry that starts ``aw-mcp serve SERVE_ARGS`` (checked against serve's parser)."""
    check_serve_arguments(serve_args)
    command, prefix = aw_mcp_command() if absolute else ("aw-mcp", [])
    entry: dict[str, Any] = {**client.stdio, "command": command, "args": [*prefix, "serve"]}
    entry["args"] += serve_args
    if env:
        entry["env"] = env
    return entry


def http_entry(client: ClientFormat, url: str, headers: list[str]) -> dict[str, Any]:
    if client.http is None:
        raise UserInputError(
            f"{client.title}'s config file starts stdio servers only: use --transport stdio "
            "(it then starts aw-mcp serve itself)"
        )
    if not url.startswith(("http://", "https://")):
        raise UserInputError(f"--url needs an http:// or https:// URL, got {url!r}")
    entry: dict[str, Any] = {**client.http, "url": url}
    if headers:
        entry["headers"] = _headers(headers)
    return entry


def default_url() -> str:
    """``aw-mcp serve --transport http``'s URL with its default host and port."""
    from aw_mcp.server.http_app import HTTP_PATH
    from aw_mcp.server.settings import ServerSettings

    defaults = ServerSettings.model_fields
    return f"http://{defaults['host'].default}:{defaults['port'].default}{HTTP_PATH}"


def aw_mcp_command() -> tuple[str, list[str]]:
    """The absolute command of the running aw-mcp: the console script that runs now, else the
    one beside this interpreter, else this interpreter with ``-m aw_mcp``."""
    running = Path(sys.argv[0])
    if running.name == "aw-mcp" and running.is_file():
        return str(running.absolute()), []
    beside = shutil.which("aw-mcp", path=str(Path(sys.executable).parent))
    if beside:
        return str(Path(beside).absolute()), []
    return str(Path(sys.executable).absolute()), ["-m", "aw_mcp"]


def check_serve_arguments(serve_args: list[str]) -> None:
    """A typo in a serve option fails here, not in the client's log after it starts aw-mcp."""
    from aw_mcp.commands import serve

    commands = argparse.ArgumentParser(prog="aw-mcp").add_subparsers()
    serve.register(commands)
    parser = commands.choices["serve"]
    parser.exit_on_error = False
    try:
        _, unknown = parser.parse_known_args(serve_args)
    except argparse.ArgumentError as exc:
        raise UserInputError(f"serve option after --: {exc}") from None
    if unknown:
        message = f"not an option of aw-mcp serve: {' '.join(unknown)}"
        known = [o for o in parser._option_string_actions if o.startswith("--")]
        flags = [u.split("=", 1)[0] for u in unknown if u.startswith("--")]
        if flags and (close := difflib.get_close_matches(flags[0], known, n=1)):
            message += f" (did you mean {close[0]}?)"
        raise UserInputError(message)
    if any(a == "--transport" or a.startswith("--transport=") for a in serve_args):
        raise UserInputError("give --transport to client-config (before --), not to serve")


def write_config(path: Path, servers_key: str, name: str, entry: dict[str, Any]) -> int:
    """Put ``entry`` into ``path`` under ``servers_key``/``name``, keeping whatever else an
    existing file holds; return how many other servers it keeps."""
    config: dict[str, Any] = {}
    if path.exists():
        try:
            config = json.loads(path.read_text() or "{}")
        except (OSError, json.JSONDecodeError) as exc:
            raise UserInputError(f"{path}: not a JSON file to add to ({exc})") from None
        if not isinstance(config, dict) or not isinstance(config.get(servers_key, {}), dict):
            raise UserInputError(f"{path}: expected a JSON object with an object {servers_key!r}")
    servers = config.setdefault(servers_key, {})
    kept = len([other for other in servers if other != name])
    servers[name] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2) + "\n")
    return kept


def _environment(items: list[str]) -> dict[str, str]:
    if bad := [item for item in items if "=" not in item or item.startswith("=")]:
        raise UserInputError(f"--env needs KEY=VALUE, got {bad[0]!r}")
    return dict(item.split("=", 1) for item in items)


def _headers(items: list[str]) -> dict[str, str]:
    headers = {}
    for item in items:
        name, sep, value = item.partition(":")
        if not sep or not name.strip():
            raise UserInputError(f"--header needs 'NAME: VALUE', got {item!r}")
        headers[name.strip()] = value.strip()
    return headers
