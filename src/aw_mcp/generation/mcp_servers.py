"""Generate real trajectories from REAL MCP servers: scripted tool calls through
``aw-mcp record``, in throwaway sandboxes. The sources (sources/*.py) say which servers,
which seed folder and which scripts; this is the runner they share.

Each episode gets a fresh copy of the source's seed folder, bind-mounted at the world's path in
private namespaces (see sandbox.py); every server runs behind its own ``aw-mcp record`` proxy
writing the same episode file, and the driver calls them one at a time, so the call numbers
run on across servers. A source's shell tools (shell_tools.py: ``run_command``, ``run_tests``)
are answered by one real bash per episode in the same sandbox, as the same user, and written
to the same file in turn. The scripts are drawn from a seeded RNG; observations are what the
servers and bash answered (times, hashes, ids as printed). Beside the episodes: ``world.yaml``
(the seed as world facts), ``source.yaml`` (the source, split, seed and pinned and measured
versions) and ``tools/<domain>.json`` (every server's real tools/list, then the shell tools as
the domain serves them).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import json
import logging
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio
import yaml
from mcp import Client, MCPError

from aw_mcp.capture.record_proxy import EpisodeRecorder, observation_of, proxy_target
from aw_mcp.capture.text_hints import annotate_captures
from aw_mcp.capture.tools_list import write_capture
from aw_mcp.domain.loader import bundled_domain_names, load_domain
from aw_mcp.errors import UserInputError
from aw_mcp.generation.mcp_state import (
    EpisodeTracing,
    FolderState,
    attach_states,
    require_strace,
)
from aw_mcp.generation.sandbox import (
    BASH,
    PATH,
    SandboxUnavailable,
    Shell,
    observation_text,
    sandboxed_command,
)
from aw_mcp.generation.shell_tools import ShellTool
from aw_mcp.progress_bar import add_quiet_flag, counted
from aw_mcp.records.folder import CAPTURES_FOLDER, recorded_date_fact, write_world_file
from aw_mcp.records.sink import RecordSink

log = logging.getLogger(__name__)

Call = tuple[str, dict[str, Any]]
Script = Callable[[random.Random], list[Call]]
Split = Literal["train", "heldout"]
SHELL_TIMEOUT = 30.0  # seconds a shell tool's command may run (run_command's own default)


@dataclass(frozen=True)
class Ref:
    """An argument to fill in when the call is made: the ref (``e12``, ``f1e3``) of the page
    element ``- <role> "<name>"`` in the latest observation that lists it (a browser
    snapshot), the ``nth`` such element (from 0). ``first=True`` takes it from the EARLIEST
    such observation instead, to provoke the real answer to a stale ref."""

    role: str
    name: str
    nth: int = 0
    first: bool = False

    def resolve(self, seen: list[str]) -> str:
        pattern = re.compile(
            rf'- {re.escape(self.role)} "{re.escape(self.name)}"[^\n]*?\[ref=(\w+)\]'
        )
        for text in seen if self.first else reversed(seen):
            found = pattern.findall(text)
            if len(found) > self.nth:
                return str(found[self.nth])
        raise LookupError(f'no {self.role} "{self.name}" (#{self.nth}) in any snapshot so far')


def resolve_refs(value: Any, seen: list[str]) -> Any:
    """``value`` with every :class:`Ref` in it replaced by the ref it names."""
    if isinstance(value, Ref):
        return value.resolve(seen)
    if isinstance(value, dict):
        return {k: resolve_refs(v, seen) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve_refs(v, seen) for v in value]
    return value


@dataclass(frozen=True)
class Template:
    """One kind of episode; a held-out template never appears in training."""

    name: str
    build: Script
    heldout: bool = False


def template_scripts(templates: list[Template]) -> dict[Split, Script]:
    """A script per split that has templates: each episode draws one of them, then its
    arguments, from the episode's RNG."""

    def drawing(pool: list[Template]) -> Script:
        return lambda rng: rng.choice(pool).build(rng)

    scripts: dict[Split, Script] = {}
    for split in ("train", "heldout"):
        pool = [t for t in templates if t.heldout == (split == "heldout")]
        if pool:
            scripts[split] = drawing(pool)
    return scripts


@dataclass
class McpWorld:
    """A source recorded from real MCP servers (a :class:`~sources.Source`)."""

    name: str
    mount_at: str  # where the seeded folder appears (must exist on the host)
    user: str
    seed: Callable[[Path], None]  # fills the folder mounted at mount_at
    servers: dict[str, list[str]]  # label -> command (run inside the sandbox)
    # A split without a script is not recorded. Sources of named templates give ``templates``
    # and leave ``scripts`` empty: it is drawn from them (``template_scripts``).
    scripts: dict[Split, Script] = field(default_factory=dict)
    templates: list[Template] = field(default_factory=list)
    world: dict[str, Any] = field(default_factory=dict)
    summary: str = ""
    versions: dict[str, str] = field(default_factory=dict)  # package -> pinned version
    domain: str = ""  # the records' domain (default: the name)
    workdir: str = ""  # the servers' working directory (default: mount_at)
    env: dict[str, str] = field(default_factory=dict)  # more environment for the servers
    # Started once around all episodes (e.g. a web site on loopback the servers read).
    around: Callable[[], AbstractContextManager[Any]] | None = None
    # World facts measured on demand, given the versions (pinned and measured).
    measure: Callable[[dict[str, str]], dict[str, Any]] | None = None
    # Tools answered by a real bash in the episode's sandbox (shell_tools.py); the shell
    # starts in shell_workdir (default: the servers' working directory).
    shell_tools: list[ShellTool] = field(default_factory=list)
    shell_workdir: str = ""
    # name -> a command printing its version in that shell (e.g. the python the shell
    # tools run): measured in a fresh sandbox by ``prepared`` into ``versions``.
    shell_versions: dict[str, str] = field(default_factory=dict)
    # The templates ``--templates`` restricted the episodes to (none: the split's whole pool),
    # written into source.yaml's command so that it records the episodes again.
    drawn_only: list[str] = field(default_factory=list)
    # The world is the seeded folder, which the tools read and write: each call's record
    # holds what it read and changed (mcp_state.py), unless generated with --no-state.
    records_state: bool = False
    # The working directory the steps' state starts in (default: the shell's, else the
    # servers').
    state_cwd: str = ""
    # Labels of the servers that are git: what they read is read as a git process's (only
    # the repositories, not the files git hashes or walks).
    git_servers: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.templates and not self.scripts:
            self.scripts = template_scripts(self.templates)

    def environment(self) -> dict[str, str]:
        home = f"/home/{self.user}" if self.mount_at == "/home" else self.mount_at
        path = os.pathsep.join(
            dict.fromkeys([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"])
        )
        base = {"HOME": home, "USER": self.user, "PATH": path, "LANG": "C.UTF-8", "TZ": "UTC"}
        return base | self.env

    def shell_environment(self) -> dict[str, str]:
        """The shell tools' bash environment: the servers' without the generator's own
        virtualenv at the head of PATH (its python is root's; the agent's shell has the
        machine's own python3, as a user at a prompt would)."""
        return self.environment() | {"PATH": PATH, "SHELL": "/bin/bash", "LOGNAME": self.user}

    def start_shell(self, root: Path) -> Shell:
        """A real bash as the world's user in the sandbox of the seed folder ``root``."""
        workdir = self.shell_workdir or self.workdir or self.mount_at
        argv = sandboxed_command(
            root, self.mount_at, self.user, workdir, self.shell_environment(), BASH
        )
        try:
            return Shell(argv, SHELL_TIMEOUT)
        except RuntimeError as exc:
            raise SandboxUnavailable(
                f"the shell of world {self.name} did not start: {exc}"
            ) from None

    def measure_shell_versions(self) -> dict[str, str]:
        """What each ``shell_versions`` probe prints in a fresh sandbox's shell; a probe that
        fails or prints nothing (the tool is not installed for the sandbox's user) is
        SandboxUnavailable."""
        if not self.shell_versions:
            return {}
        root = Path(tempfile.mkdtemp(prefix=f"aw-{self.name}-probe-"))
        try:
            self.seed(root)
            shell = self.start_shell(root)
            try:
                seen = {name: shell.run(probe) for name, probe in self.shell_versions.items()}
            finally:
                shell.close()
        finally:
            shutil.rmtree(root, ignore_errors=True)
        if failed := {n: out for n, (out, code) in seen.items() if code != 0 or not out.strip()}:
            name, output = next(iter(failed.items()))
            raise SandboxUnavailable(
                f"{name} is not usable by user {self.user} in the sandbox "
                f"({self.shell_versions[name]!r}): {output.strip()}"
            )
        return {name: out.strip() for name, (out, _) in seen.items()}

    # -- the Source protocol ----------------------------------------------------------------

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        splits = list(self.scripts)
        parser.add_argument("--out", type=Path, required=True, metavar="DIR")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--episodes", type=int, default=10)
        parser.add_argument(
            "--split",
            choices=splits,
            default=splits[0],
            help="which episode templates to draw from (held-out ones never appear in "
            "training; a source held out entirely has only 'heldout')",
        )
        parser.add_argument(
            "--server",
            action="append",
            default=[],
            metavar="LABEL=COMMAND",
            help=f"replace a server's command (labels: {', '.join(self.servers)}); it runs "
            "as the world's user, so it must be executable by that user",
        )
        if self.templates:
            parser.add_argument(
                "--templates",
                type=lambda text: [n.strip() for n in text.split(",") if n.strip()],
                default=[],
                metavar="NAME[,NAME...]",
                help="draw only these episode templates of the split (a wrong name lists them)",
            )
        if self.records_state:
            parser.add_argument(
                "--no-state",
                dest="state",
                action="store_false",
                help="do not record what each call read and changed (by default strace "
                "follows the servers and the shell, the sandbox's folder is snapshot around "
                "each call, and each record holds its call's recall and change)",
            )
        add_quiet_flag(parser)

    def generate(self, args: argparse.Namespace) -> list[Path]:
        if args.episodes < 1:
            raise UserInputError("--episodes must be at least 1")
        names = getattr(args, "templates", [])
        if names:  # a wrong name fails here, before any sandbox starts
            self.only_templates(args.split, names)
        if bad := [item for item in args.server if "=" not in item]:
            raise UserInputError(f"--server needs LABEL=COMMAND, got {bad[0]!r}")
        servers = {k: shlex.split(v) for k, v in (s.split("=", 1) for s in args.server)}
        world = self.prepared(servers).drawing_only(args.split, names)
        return generate_mcp_world(
            world,
            args.out,
            args.seed,
            args.episodes,
            args.quiet,
            args.split,
            trace_state=getattr(args, "state", True),
        )

    def episode_calls(self, split: Split, seed: int, number: int) -> list[Call]:
        """The calls of episode ``number`` of ``split`` for ``seed``: drawn from the episode's
        own RNG, so the same three always give the same calls (and a folder's source.yaml
        records its episodes again)."""
        kind = "" if split == "train" else f"{split}:"
        return self.scripts[split](random.Random(f"{self.name}:{kind}{seed}:{number}"))

    def drawing_only(self, split: Split, names: list[str]) -> McpWorld:
        """A copy whose ``split`` episodes draw only the templates called ``names`` (none:
        this world as it is)."""
        if not names:
            return self
        return dataclasses.replace(
            self, templates=self.only_templates(split, names), scripts={}, drawn_only=names
        )

    def only_templates(self, split: Split, names: list[str]) -> list[Template]:
        """The split's templates called ``names``; an unknown name is a ValueError that lists
        the split's templates."""
        pool = {t.name: t for t in self.templates if t.heldout == (split == "heldout")}
        if unknown := [n for n in names if n not in pool]:
            raise UserInputError(
                f"no {split} template {', '.join(unknown)} of {self.name} "
                f"(its {split} templates: {', '.join(sorted(pool))})"
            )
        return [pool[n] for n in names]

    def prepared(self, servers: dict[str, list[str]] | None = None) -> McpWorld:
        """A copy ready to run: server commands replaced by ``servers`` (label -> command),
        world facts measured, the mount point made."""
        if unknown := set(servers or {}) - set(self.servers):
            raise UserInputError(f"world {self.name} has no server {sorted(unknown)[0]!r}")
        Path(self.mount_at).mkdir(exist_ok=True)  # an empty mount point (e.g. /workspace)
        versions = {**self.versions, **self.measure_shell_versions()}
        return dataclasses.replace(
            self,
            servers={**self.servers, **(servers or {})},
            versions=versions,
            world=copy.deepcopy(self.world or (self.measure(versions) if self.measure else {})),
        )


def home_seed(user: str, files: dict[str, str] | None = None) -> Callable[[Path], None]:
    """A seed for ``mount_at="/home"``: ``/home/<user>`` holding ``files`` (path -> text)."""

    def seed(root: Path) -> None:
        home = root / user
        home.mkdir(parents=True)
        for rel, text in (files or {}).items():
            (home / rel).parent.mkdir(parents=True, exist_ok=True)
            (home / rel).write_text(text)

    return seed


# The unprivileged user the single MCP servers (time, memory, ...) run as, and its PATH: no
# virtualenv of the generator on it (the everything server's get-env prints it).
MCP_USER = "mcp"
MCP_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin"}


def mcp_user_world(
    templates: list[Template],
    env: dict[str, str] | None = None,
    seed: Callable[[Path], None] | None = None,
    **fields: Any,
) -> McpWorld:
    """A source whose servers run as :data:`MCP_USER` in a fresh ``/home/mcp`` (``seed``
    fills it; empty by default), its scripts drawn from ``templates``."""
    return McpWorld(
        mount_at="/home",
        workdir=f"/home/{MCP_USER}",
        user=MCP_USER,
        env={**MCP_ENV, **(env or {})},
        seed=seed or home_seed(MCP_USER),
        templates=templates,
        **fields,
    )


def python_server(name: str, command: str) -> str:
    """Where .ci/run installs the PyPI server ``name``: its own virtualenv under /opt, made
    with Debian's python (the sandbox's user cannot reach one under /root)."""
    return f"/opt/aw-mcp-{name}/bin/{command}"


def seed_with_server_python(venv: str, package: str, script: str, *args: str) -> None:
    """Run ``script`` (``python -c``) with the python of the server ``package``'s virtualenv
    (``python_server(venv, ...)``): a seed written by the library the server reads it with
    (a DuckDB file, an .xlsx). A missing virtualenv or a failing script is a
    SandboxUnavailable that says what the python said."""
    python = python_server(venv, "python")
    if not Path(python).exists():
        raise SandboxUnavailable(f"{package} is not installed in /opt/aw-mcp-{venv} (.ci/run)")
    done = subprocess.run([python, "-c", script, *args], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:  # e.g. a venv without the library: say what its python said
        raise SandboxUnavailable(
            f"could not seed with {package}'s python: {done.stderr.strip()[-500:]}"
        )


def prepare_world(name: str, servers: dict[str, list[str]] | None = None) -> McpWorld:
    """The MCP source ``name`` ready to run, its server commands replaced by ``servers``."""
    from aw_mcp.generation.sources import source

    found = source(name)
    if not isinstance(found, McpWorld):
        raise UserInputError(f"source {name} is not recorded from MCP servers")
    return found.prepared(servers)


def episode_id(world: McpWorld, split: Split, seed: int, number: int) -> str:
    kind = "" if split == "train" else f"-{split}"
    return f"{world.name}{kind}-s{seed}-{number:04d}"


def _proxy(world: McpWorld, out: Path, episode: str, root: Path, command: list[str]):
    """An ``aw-mcp record`` proxy in front of ``command`` run in the sandbox."""
    inner = sandboxed_command(
        root,
        world.mount_at,
        world.user,
        world.workdir or world.mount_at,
        world.environment(),
        command,
    )
    return proxy_target(out, inner, "--domain", world.domain or world.name, "--episode", episode)


async def _run_episode(
    world: McpWorld, out: Path, episode: str, calls: list[Call], trace_state: bool = False
) -> list[dict[str, Any]]:
    """Run ``calls`` in a fresh sandbox, recording each into ``out``; returns the servers'
    tools as their proxies saved them (each proxy overwrites the domain's capture file when
    it starts, so it is read after each start). ``trace_state``: each record also holds what
    its call read and changed (mcp_state.py)."""
    capture = out / CAPTURES_FOLDER / f"{world.domain or world.name}.json"
    records = RecordSink(out).path_for(episode)
    root = Path(tempfile.mkdtemp(prefix=f"aw-{world.name}-"))
    tracing: EpisodeTracing | None = None
    try:
        world.seed(root)
        if trace_state:
            cwd = world.state_cwd or world.shell_workdir or world.workdir or world.mount_at
            tracing = EpisodeTracing(FolderState(world.mount_at, root), cwd, episode)
        owner: dict[str, Client] = {}
        label_of: dict[str, str] = {}
        listed_tools: list[dict[str, Any]] = []
        async with AsyncExitStack() as stack:
            for label, command in world.servers.items():
                target = _proxy(world, out, episode, root, command)
                try:
                    client = await stack.enter_async_context(
                        Client(target, read_timeout_seconds=60)
                    )
                except Exception as exc:
                    raise SandboxUnavailable(
                        f"the {label} server ({' '.join(command)}) did not start as user "
                        f"{world.user} in the sandbox ({type(exc).__name__}); it must be "
                        "executable by that user (a virtualenv whose python lives under "
                        "/root is not)"
                    ) from None
                if tracing is not None:
                    tracing.follow_server(label, list(target.args), label in world.git_servers)
                for listed in json.loads(capture.read_text(encoding="utf-8"))["tools"]:
                    if listed["name"] not in owner:
                        owner[listed["name"]] = client
                        label_of[listed["name"]] = label
                        listed_tools.append(listed)
            shell_tools = {t.name: t for t in world.shell_tools}
            if both := sorted(set(shell_tools) & set(owner)):
                raise RuntimeError(f"{both[0]} is both a shell tool and a server's tool")
            shell = None
            if shell_tools:
                shell = stack.enter_context(contextlib.closing(world.start_shell(root)))
                if tracing is not None:
                    tracing.follow_shell(shell)
            if tracing is not None:
                stack.callback(tracing.close)  # the traces end before the shell and servers
            recorder = EpisodeRecorder(RecordSink(out), world.domain or world.name, episode)
            seen: list[str] = []  # the observations so far, for Ref arguments
            for tool, arguments in calls:
                if tool not in owner and tool not in shell_tools:
                    raise RuntimeError(f"no server of world {world.name} has the tool {tool!r}")
                try:
                    arguments = resolve_refs(arguments, seen)
                except LookupError as exc:  # the page is not what the script expected
                    log.warning("%s: %s; the episode ends here", episode, exc)
                    break
                if shell is not None and tool in shell_tools:
                    call = (shell_tools[tool], arguments)
                    seen.append(await _shell_call(shell, *call, recorder, episode, tracing))
                    continue
                before = tracing.before() if tracing is not None else None
                on_file = _records_on_file(records)
                # A JSON-RPC error is recorded by the proxy (rpc-error); the episode goes on.
                with contextlib.suppress(MCPError):
                    result = await owner[tool].call_tool(tool, arguments)
                    seen.append(observation_of(result))
                if tracing is not None:
                    done = (label_of[tool], before, records, on_file, tool)
                    await anyio.to_thread.run_sync(tracing.server_call_done, *done)
        if tracing is not None:  # the proxies have written every record and stopped
            attach_states(records, tracing.states)
    finally:
        if tracing is not None:
            tracing.close()
        shutil.rmtree(root, ignore_errors=True)
    return listed_tools


def _records_on_file(path: Path) -> int:
    return sum(1 for _ in path.open(encoding="utf-8")) if path.exists() else 0


async def _shell_call(
    shell: Shell,
    tool: ShellTool,
    arguments: dict[str, Any],
    recorder: EpisodeRecorder,
    episode: str,
    tracing: EpisodeTracing | None = None,
) -> str:
    """Run a shell tool's call in the episode's bash and record it, numbered on from the
    proxies' records in the same file; the observation (output, then ``[exit code: N]``).
    With ``tracing``, the record holds what the call read and changed."""
    line = tool.command_line(arguments)
    started = time.time()
    state = None
    if tracing is not None:
        output, code, state = await anyio.to_thread.run_sync(tracing.shell_call, shell, line)
    else:
        output, code = await anyio.to_thread.run_sync(shell.run, line)
    observation = observation_text(output, code)
    recorder.write(
        episode,
        recorder.next_index(episode),
        tool.name,
        arguments,
        observation,
        is_error=False,  # a failing command is a successful call: its exit code says so
        source="real",
        started=started,
        state=state,
    )
    return observation


def generate_mcp_world(
    world: McpWorld,
    out: Path,
    seed: int,
    episodes: int,
    quiet: bool = True,
    split: Split = "train",
    trace_state: bool = True,
) -> list[Path]:
    """Record ``episodes`` scripted episodes of ``world``'s ``split`` into ``out`` with its
    world.yaml and source.yaml. Without ``quiet``, a progress bar counts the episodes.
    ``trace_state``: a world that ``records_state`` gives each record what its call read and
    changed (needs strace; refused before any episode runs without it)."""
    if split not in world.scripts:
        raise UserInputError(
            f"source {world.name} has no {split} episodes ({', '.join(world.scripts)})"
        )
    for label, command in world.servers.items():
        if shutil.which(command[0], path=world.environment()["PATH"]) is None:
            raise SandboxUnavailable(f"the {label} server ({command[0]}) is not installed")
    trace_state = trace_state and world.records_state
    if trace_state:
        require_strace()
    domain = world.domain or world.name
    shell_definitions = shell_tool_definitions(world)  # a missing one fails before recording
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    listed: list[dict[str, Any]] = []
    with world.around() if world.around else contextlib.nullcontext():
        for number in counted(range(episodes), world.name, "episode", quiet):
            episode = episode_id(world, split, seed, number)
            path = RecordSink(out).path_for(episode)  # where the recording proxy writes it
            path.unlink(missing_ok=True)  # records append: a rerun must not double an episode
            calls = world.episode_calls(split, seed, number)
            listed = anyio.run(_run_episode, world, out, episode, calls, trace_state)
            paths.append(path)
    # Each proxy saved its own server's list under the one domain name: keep them all.
    write_capture({"tools": listed + shell_definitions}, out / CAPTURES_FOLDER / f"{domain}.json")
    if world.world:
        world.world.setdefault("facts", {})["date"] = recorded_date_fact(out)
        mirrored = domain not in bundled_domain_names()  # served from its captured tools/list
        write_world_file(
            out / "world.yaml",
            world.world,
            f"recorded {world.name} episodes (the seed every episode starts from)",
            domain,
            f"--tools-from {out / CAPTURES_FOLDER / domain}.json" if mirrored else None,
        )
    annotate_captures(out)  # how the server writes its structured answers as text
    write_source_file(out, world, split, seed, episodes, trace_state)
    return paths


def shell_tool_definitions(world: McpWorld) -> list[dict[str, Any]]:
    """The shell tools of ``world`` as its domain serves them (the bundled domain file's
    definitions, in the tools/list shape); a shell tool the domain lacks is a ValueError."""
    if not world.shell_tools:
        return []
    domain = world.domain or world.name
    served = (
        {t.name: t for t in load_domain(domain).tools} if domain in bundled_domain_names() else {}
    )
    if missing := [t.name for t in world.shell_tools if t.name not in served]:
        raise UserInputError(f"the {domain} domain does not serve the shell tool {missing[0]}")
    return [
        served[t.name].model_dump(
            by_alias=True, exclude_none=True, exclude={"simulation"}, mode="json"
        )
        for t in world.shell_tools
    ]


def write_source_file(
    out: Path, world: McpWorld, split: Split, seed: int, episodes: int, state: bool = True
) -> None:
    """``source.yaml``: what recorded the episodes in ``out``, with the pinned versions
    (``state``: whether the records hold each call's state, for a world that records it)."""
    command = f"aw-mcp generate {world.name} --out {out} --seed {seed} --episodes {episodes}"
    info = {
        "source": world.name,
        "domain": world.domain or world.name,
        "split": split,
        "held_out_entirely": "train" not in world.scripts,
        "seed": seed,
        "episodes": episodes,
        "command": command
        + ("" if split == "train" else f" --split {split}")
        + (f" --templates {','.join(world.drawn_only)}" if world.drawn_only else "")
        + (" --no-state" if world.records_state and not state else ""),
        "versions": world.versions,
        "servers": {label: " ".join(cmd) for label, cmd in world.servers.items()},
    }
    text = yaml.safe_dump(info, sort_keys=False, allow_unicode=True, width=100)
    (out / "source.yaml").write_text(text, encoding="utf-8")
