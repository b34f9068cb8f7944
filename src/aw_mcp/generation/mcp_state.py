"""The ground truth of state for episodes recorded from real MCP servers in a seeded folder.

A source whose world is a folder (``McpWorld.records_state``: ``os``, ``swe``) gets, for every
call, what the call read of the world and what it changed, measured as the terminal
generator measures a command (``state_trace``), never by interpreting the tool:

- **Change**, for every call: two snapshots of the sandbox's folder, taken on the host before
  and after the call, and their difference (``state_trace.step_state``), with the facts of
  every repository git worked on. A repository counts as worked on when git read it (the
  trace below) or when its ``.git`` changed during the call (``HEAD``, the index, the refs):
  the git server commits in Python, without a ``git`` process to trace.
- **Recall of a shell tool** (``run_command``, ``run_tests``): the episode's bash is the same
  kind of :class:`~sandbox.Shell` as the terminal generator's, so strace follows it and each
  command ends at a marker the shell stats, exactly as ``BashSandbox.run_traced`` does.
- **Recall of an MCP server's call**: ``strace -f -y`` attached to the server process itself
  (found as the only child of its ``aw-mcp record`` proxy) and the git processes it starts.
  A call's lines end at a marker signal: once the proxy has the answer, the driver sends the
  server a ``SIGWINCH`` (ignored by the servers; a traced process still reports it), and the
  trace's line for that signal closes the call. Everything the server did for the call
  happened before it wrote its answer, so before the signal: the marker is exact, not a
  pause. Markers are sent only once strace holds every thread of the server (``TracerPid``),
  so none can reach an untraced thread. The accesses are read as a command's are
  (``state_trace.accesses_of``): files opened to read and folders listed, as they were
  before the call; paths looked for and not found; files only looked up, by their size;
  repositories git read. Paths outside the sandbox's folder (the server's own code) do not
  count.

A trace that does not end at its marker stops the episode's tracing: that call and every later
call of the episode are recorded without state (incomplete, never wrong), with a warning.
Without strace, generation refuses to start (``--no-state`` records without state).

The proxies write the records; the state is attached afterwards (:func:`attach_states`), each
to the record of its call, leaving every other field of every record as it was.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from aw_mcp.generation.sandbox import Shell
from aw_mcp.generation.state_trace import (
    Accesses,
    ShellTrace,
    Snapshot,
    TraceUnavailable,
    accesses_of,
    attach,
    git_facts,
    step_state,
    take_snapshot,
)
from aw_mcp.records.calls import CallRecord
from aw_mcp.state.steps import GitFacts, StepState

log = logging.getLogger(__name__)

MARK_SIGNAL = signal.SIGWINCH  # ignored by default; a traced process still reports it


STRACE = "strace"


def require_strace() -> None:
    """TraceUnavailable unless strace is installed (checked before any episode runs)."""
    if shutil.which(STRACE) is None:
        raise TraceUnavailable("strace is not installed")


# --- the server behind a proxy -----------------------------------------------------------------


def _cmdline(pid: str) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0")[:-1]]


def _parent(pid: str) -> int | None:
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat_line.rsplit(")", 1)[1].split()[1])


def server_pid(proxy_args: list[str]) -> int:
    """The process of the server an ``aw-mcp record`` proxy started: the only child of the
    child of this process whose arguments are ``proxy_args``. TraceUnavailable if there is
    not exactly one of each, or if that process already has children of its own (a wrapper
    whose server runs in a child: strace would not follow what was started before it)."""
    me = os.getpid()
    pids = [p for p in os.listdir("/proc") if p.isdigit()]
    proxies = [p for p in pids if _parent(p) == me and _cmdline(p)[1:] == proxy_args]
    if len(proxies) != 1:
        raise TraceUnavailable(f"found {len(proxies)} recording proxies for a server, not one")
    children = [p for p in pids if _parent(p) == int(proxies[0])]
    if len(children) != 1:
        raise TraceUnavailable(f"the recording proxy has {len(children)} processes, not one")
    if any(_parent(p) == int(children[0]) for p in pids):
        raise TraceUnavailable(
            f"the server {' '.join(_cmdline(children[0]))} runs processes of its own: "
            "what they do cannot be traced"
        )
    return int(children[0])


def _all_threads_traced(pid: int, tracer: int) -> bool:
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for task in tasks:
        try:
            status = Path(f"/proc/{pid}/task/{task}/status").read_text()
        except OSError:
            continue  # a thread that just ended
        if f"TracerPid:\t{tracer}\n" not in status:
            return False
    return True


class ServerTrace:
    """strace attached to a running MCP server (``strace -f``: its threads and the processes
    it starts); each call's lines end at the signal :meth:`mark` sends."""

    def __init__(self, pid: int, git: bool = False, timeout: float = 10.0):
        self.pid = pid
        self.git = git
        self.timeout = timeout
        self._trace = ShellTrace(pid, timeout)
        deadline = time.monotonic() + timeout
        while not _all_threads_traced(pid, self._trace.tracer_pid):
            if time.monotonic() > deadline:
                self.close()
                raise TraceUnavailable(f"strace did not attach to every thread of server {pid}")
            time.sleep(0.01)
        self._marker = (
            f"--- {MARK_SIGNAL.name} {{si_signo={MARK_SIGNAL.name}, si_code=SI_USER, "
            f"si_pid={os.getpid()},"
        )
        if self.lines() is None:  # what the server did before now is nobody's call
            self.close()
            raise TraceUnavailable(f"strace did not report the marker of server {pid}")

    def lines(self) -> list[str] | None:
        """The trace's lines since the last marker, up to a new one (None: it did not come in
        time; the trace is then out of step and must not be read again)."""
        try:
            os.kill(self.pid, MARK_SIGNAL)
        except ProcessLookupError:
            return None
        return self._trace.lines_until(self._marker, self.timeout)

    def close(self) -> None:
        self._trace.close()


# --- the episode's folder ------------------------------------------------------------------------


def _git_fingerprint(host_repository: Path) -> str:
    """A digest of what git changes when it works on a repository: HEAD, the index, the refs."""
    git = host_repository / ".git"
    digest = hashlib.sha256()
    paths = [git / "HEAD", git / "index", git / "packed-refs"]
    if (git / "refs").is_dir():
        paths += sorted(p for p in (git / "refs").rglob("*") if p.is_file())
    for path in paths:
        digest.update(str(path.relative_to(git)).encode() + b"\0")
        with contextlib.suppress(OSError):
            digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


@dataclass
class Before:
    """The folder as it was before a call."""

    snapshot: Snapshot
    git: dict[str, GitFacts]
    fingerprints: dict[str, str]


class FolderState:
    """The sandbox's folder seen from the host: ``mount_at`` (its path in the sandbox) is
    ``root`` on the host. ``skip``: paths no call means to read."""

    def __init__(self, mount_at: str, root: Path, skip: Iterable[str] = ()):
        self.mounts = {mount_at: root}
        self.mount_at = mount_at
        self.root = root
        self.skip = list(skip)

    def _host(self, path: str) -> Path:
        rel = os.path.relpath(path, self.mount_at)
        return self.root if rel == "." else self.root / rel

    def before(self) -> Before:
        snapshot = take_snapshot(self.mounts)
        return Before(
            snapshot,
            {r: git_facts(r, self._host(r)) for r in snapshot.repositories},
            {r: _git_fingerprint(self._host(r)) for r in snapshot.repositories},
        )

    def step(self, before: Before, seen: Accesses, cwd: str) -> StepState:
        """The call's recall (from ``seen``) and change (``before`` against now)."""
        after = take_snapshot(self.mounts)
        worked_on = {
            r
            for r in after.repositories
            if _git_fingerprint(self._host(r)) != before.fingerprints.get(r)
        }
        return step_state(
            seen,
            before.snapshot,
            after,
            roots=[self.mount_at],
            cwd=cwd,
            git_before=before.git,
            git_after={r: git_facts(r, self._host(r)) for r in after.repositories},
            skip=self.skip,
            git_touched=worked_on,
        )


def traced_shell_run(
    shell: Shell, trace: ShellTrace, line: str, cwd: str
) -> tuple[str, int, Accesses | None]:
    """Run ``line`` in a traced shell, as ``BashSandbox.run_traced`` does: its output, exit
    code and what it touched (None: the trace did not end at the command's marker)."""
    marker, after = trace.next_marker()
    output, code = shell.run(line, after=after)
    lines = trace.lines_until(marker)
    return output, code, None if lines is None else accesses_of(lines, shell.pid, cwd)


def trace_shell(shell: Shell) -> ShellTrace:
    """strace attached to an episode's shell (TraceUnavailable if it cannot be)."""
    return attach(shell.pid, shell.run)


def server_accesses(lines: list[str], pid: int, cwd: str, git: bool = False) -> Accesses:
    """What a server's call touched; a server has no working directory of the episode's (a
    ``chdir`` of its own is not the shell's). ``git``: the server is git (its accesses are
    read as a git process's: only what it reads of a repository counts)."""
    seen = accesses_of(lines, pid, cwd, all_git=git)
    seen.shell_cwd = None
    return seen


# --- the records ---------------------------------------------------------------------------------


def attach_states(path: Path, states: dict[int, StepState]) -> int:
    """Give the records of ``path`` whose index is in ``states`` their state; every other
    field, and every other record, stays as written. Returns how many were given one."""
    if not states or not path.exists():
        return 0
    lines = path.read_text(encoding="utf-8").split("\n")
    given = 0
    for number, line in enumerate(lines):
        if not line:
            continue
        data = json.loads(line)
        step = states.get(data.get("index"))
        if step is None or data.get("state") is not None:
            continue
        data["state"] = step.model_dump(mode="json")
        CallRecord.model_validate(data)  # still a record
        lines[number] = json.dumps(data, ensure_ascii=False)
        given += 1
    partial = path.with_name(path.name + ".partial")
    partial.write_text("\n".join(lines), encoding="utf-8", errors="backslashreplace")
    partial.replace(path)
    return given


# --- one episode ---------------------------------------------------------------------------------


def _last_record(path: Path) -> tuple[int, dict[str, object] | None]:
    """How many records ``path`` holds, and the last one."""
    if not path.exists():
        return 0, None
    lines = [line for line in path.read_text(encoding="utf-8").split("\n") if line]
    return len(lines), json.loads(lines[-1]) if lines else None


class EpisodeTracing:
    """What one episode's calls read and changed: its folder's snapshots, strace on its
    shell and on each server. The states of the servers' calls are kept by their record's
    index until :func:`attach_states` gives them to the records; a shell call's goes into its
    record as it is written. Once a trace is out of step, no later call gets a state."""

    def __init__(self, folder: FolderState, cwd: str, episode: str):
        self.folder = folder
        self.cwd = cwd
        self.episode = episode
        self.states: dict[int, StepState] = {}
        self.live = True
        self._servers: dict[str, ServerTrace] = {}
        self._shell: ShellTrace | None = None

    def follow_server(self, label: str, proxy_args: list[str], git: bool = False) -> None:
        """Trace the server ``label`` (``git``: a git server, read as git)."""
        self._servers[label] = ServerTrace(server_pid(proxy_args), git)

    def follow_shell(self, shell: Shell) -> None:
        self._shell = trace_shell(shell)

    def _stop(self, why: str) -> None:
        log.warning(
            "%s: %s; this call and the episode's later calls are recorded without state",
            self.episode,
            why,
        )
        self.live = False
        self.close()

    def before(self) -> Before | None:
        return self.folder.before() if self.live else None

    def server_call_done(
        self, label: str, before: Before | None, records: Path, on_file: int, tool: str
    ) -> None:
        """After a server's call: keep its state for the one record the call added."""
        if before is None or not self.live:
            return
        trace = self._servers[label]
        lines = trace.lines()
        if lines is None:
            self._stop(f"the trace of the {label} server's {tool} did not end")
            return
        seen = server_accesses(lines, trace.pid, self.cwd, trace.git)
        state = self.folder.step(before, seen, self.cwd)
        count, last = _last_record(records)
        if count != on_file + 1 or last is None or last.get("tool") != tool:
            log.warning("%s: %s left no single record; its state is not kept", self.episode, tool)
            return
        index = last.get("index")
        if isinstance(index, int):
            self.states[index] = state

    def shell_call(self, shell: Shell, line: str) -> tuple[str, int, StepState | None]:
        """Run a shell tool's line: its output, exit code and state (None: not traced)."""
        before = self.before()
        if before is None or self._shell is None:
            output, code = shell.run(line)
            return output, code, None
        output, code, seen = traced_shell_run(shell, self._shell, line, self.cwd)
        if seen is None:
            self._stop(f"the trace of {line!r} did not end")
            return output, code, None
        state = self.folder.step(before, seen, self.cwd)
        self.cwd = seen.shell_cwd or self.cwd
        return output, code, state

    def close(self) -> None:
        traces: list[ServerTrace | ShellTrace] = [*self._servers.values()]
        if self._shell is not None:
            traces.append(self._shell)
        self._servers, self._shell = {}, None
        for trace in traces:
            trace.close()
