"""A throwaway real bash for the trajectory generator: the Terminal world's machine, for real.

Each sandbox is one persistent ``bash`` process running as an unprivileged user in a private
mount and UTS namespace (``unshare``), built from a ``worlds.SandboxWorld`` (by default the
first generated world: user ``dev``, host ``devbox``, an EMPTY ``/home/dev/project``), so the
world model's facts hold literally:

- fresh directories are bind-mounted over ``/home`` and ``/srv``, holding only the user's home
  with a ``.gitconfig``, the working directory, its files and its git history; nothing of one
  episode survives into the next;
- the host name is the world's; HOME, USER, PATH, LANG=C, TZ=UTC and umask 022 are fixed;
- bash is interactive (its error messages read ``bash: foo: command not found`` as at a
  prompt) without line editing, prompts or history expansion, and reads commands from a pipe,
  so ``cd``, variables and files carry over from one command to the next;
- stdout and stderr share one pipe, so the output keeps the order bash printed it in; there is
  no terminal, so ``ls`` prints one name per line, as under an MCP shell tool.

This needs root (to create the user, mount and switch user) and ``unshare``; without them
:class:`SandboxUnavailable` says so. It is used only by the generator, never by ``serve``.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import select
import shlex
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from aw_mcp.errors import AwMcpError, UserInputError
from aw_mcp.generation.state_trace import (
    ShellTrace,
    TraceUnavailable,
    accesses_of,
    attach,
    git_facts,
    step_state,
    take_snapshot,
)
from aw_mcp.generation.worlds import HISTORY_FILE, SandboxWorld
from aw_mcp.state.steps import GitFacts, StepState

log = logging.getLogger(__name__)

USER = "dev"
HOSTNAME = "devbox"
HOME = "/home/dev"
PROJECT = "/home/dev/project"
PATH = "/usr/local/bin:/usr/bin:/bin"
GIT_NAME = "Dev"
GIT_EMAIL = "dev@devbox"
ENVIRONMENT = {
    "HOME": HOME,
    "USER": USER,
    "LOGNAME": USER,
    "SHELL": "/bin/bash",
    "PATH": PATH,
    "LANG": "C",
    "TZ": "UTC",
}

# Runs as root inside the new namespaces: hands what is in the prepared folder to the user,
# mounts it (and each extra "FOLDER=MOUNT_POINT" of the sixth argument, space-separated),
# then becomes the user and runs the command. Arguments: root, mount point, user, working
# directory, host name, extra mounts, then `env` assignments and the command.
_SETUP = """set -e
root="$1"; mount_at="$2"; user="$3"; workdir="$4"; host="$5"; extra="$6"; shift 6
find "$root" -mindepth 1 -exec chown "$user:$user" {} +
chmod 755 "$root"
mount --bind "$root" "$mount_at"
for pair in $extra; do
  find "${pair%%=*}" -mindepth 1 -exec chown "$user:$user" {} +
  mount --bind "${pair%%=*}" "${pair#*=}"
done
hostname "$host"
cd "$workdir"
umask 022
exec setpriv --reuid "$user" --regid "$user" --init-groups env -i "$@"
"""

_SENTINEL = b"\x1eAW-END:"
_SENTINEL_END = b"\x1e"
# Prompts off, history expansion off ('!' stays literal), then one sentinel to sync on.
_INIT = "PS1=; PS2=; PS0=; unset PROMPT_COMMAND; set +H"


class SandboxUnavailable(AwMcpError):
    """This machine cannot host the sandbox (not root, or no user namespaces / unshare)."""


class CommandTimeout(AwMcpError):
    """A command did not finish within the per-command timeout; its shell was killed."""


def ensure_user(user: str = USER) -> None:
    """Create the unprivileged ``user`` (no home on the host: each sandbox mounts one)."""
    if os.geteuid() != 0:
        raise SandboxUnavailable(
            "the trajectory generator must run as root: it creates an unprivileged user, "
            "mounts a fresh home in a private namespace and runs the tools as that user"
        )
    for tool in ("unshare", "setpriv", "useradd"):
        if shutil.which(tool) is None:
            raise SandboxUnavailable(f"'{tool}' (util-linux / passwd) is not installed")
    if subprocess.run(["id", "-u", user], capture_output=True).returncode != 0:
        subprocess.run(
            [
                "useradd",
                "--no-create-home",
                "--home-dir",
                f"/home/{user}",
                "--shell",
                "/bin/bash",
                "--user-group",
                user,
            ],
            check=True,
        )


def sandboxed_command(
    root: Path,
    mount_at: str,
    user: str,
    workdir: str,
    env: dict[str, str],
    command: list[str],
    hostname: str = HOSTNAME,
    extra_mounts: dict[str, str] | None = None,
) -> list[str]:
    """The argv that runs ``command`` as ``user`` with ``root`` mounted at ``mount_at`` (which
    must exist on the host) in private mount and UTS namespaces. What ``root`` holds is
    handed to ``user``; the environment is exactly ``env``. ``extra_mounts`` maps folders
    inside ``root`` to more mount points (mounted after ``root``)."""
    ensure_user(user)
    extra_mounts = extra_mounts or {}
    for point in [mount_at, *extra_mounts.values()]:
        if not Path(point).is_dir():
            raise SandboxUnavailable(f"the mount point {point} does not exist on this machine")
    return [
        "unshare",
        "--mount",
        "--uts",
        "--propagation",
        "private",
        "bash",
        "-c",
        _SETUP,
        "aw-sandbox",
        str(root),
        mount_at,
        user,
        workdir,
        hostname,
        " ".join(f"{folder}={point}" for folder, point in extra_mounts.items()),
        *(f"{k}={v}" for k, v in env.items()),
        *command,
    ]


# The world of the first generated episodes: an empty project folder of the user dev.
LEGACY_WORLD = SandboxWorld(user=USER, hostname=HOSTNAME, working_directory=PROJECT)


def environment_of(world: SandboxWorld) -> dict[str, str]:
    """The sandbox shell's whole environment for ``world``'s user (with a pinned clock, git
    dates every commit at the world's date: the same hashes on every run)."""
    home = world.home
    environment = {**ENVIRONMENT, "HOME": home, "USER": world.user, "LOGNAME": world.user}
    pinned = pinned_time(world)
    if pinned is not None:
        stamp = f"@{pinned} +0000"
        environment |= {"GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
    return environment


def pinned_time(world: SandboxWorld) -> int | None:
    """The world's date (``2026-11-30 09:00 UTC``) in seconds since the epoch; None when it
    gives none, or none this reads (then the real clock runs)."""
    if not world.date:
        return None
    text = world.date.strip().removesuffix("UTC").removesuffix("Z").strip()
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        log.warning("the world's date %r is not a date and time; the real clock runs", world.date)
        return None
    return int(moment.replace(tzinfo=moment.tzinfo or UTC).timestamp())


def gitconfig_of(world: SandboxWorld) -> str:
    name, email = world.git_identity
    return f"[user]\n\tname = {name}\n\temail = {email}\n[init]\n\tdefaultBranch = main\n"


# The interactive bash of a sandbox (see the module's docstring for why interactive).
BASH = ["bash", "--noprofile", "--norc", "--noediting", "-i"]


class Shell:
    """One real bash process started by ``argv`` (a :func:`sandboxed_command` running
    :data:`BASH`), fed one command at a time: ``cd``, variables and files carry over.
    Startup output (job-control warnings) is dropped; :meth:`close` kills its process group."""

    def __init__(self, argv: list[str], command_timeout: float = 10.0):
        self.command_timeout = command_timeout
        self._buffer = b""
        self._proc: subprocess.Popen[bytes] | None = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # one process group to kill on a timeout
        )
        try:
            self.run(_INIT)
        except Exception:
            self.close()
            raise

    @property
    def pid(self) -> int:
        if self._proc is None:
            raise RuntimeError("the shell is not running")
        return self._proc.pid

    def run(self, command: str, after: str = "") -> tuple[str, int]:
        """Run one command line in this shell: (everything it printed, exit code). ``after``:
        a line the shell runs once the command's output is complete (a trace marker)."""
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise RuntimeError("the shell is not running")
        # A group, so `cd` and variables stay in this shell; stdin from /dev/null, so a command
        # that reads input cannot swallow the next command.
        # The sentinel goes on its own line: an expansion error aborts the rest of its line.
        script = f"{{ {command}\n}} </dev/null\nprintf '\\036AW-END:%d\\036' \"$?\"\n"
        if after:
            script += after + "\n"
        try:
            proc.stdin.write(script.encode())
            proc.stdin.flush()
        except BrokenPipeError:
            raise RuntimeError(f"the shell has exited; output: {self._buffer!r}") from None
        return self._read_until_sentinel(command)

    def _read_until_sentinel(self, command: str) -> tuple[str, int]:
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        deadline = time.monotonic() + self.command_timeout
        while True:
            start = self._buffer.find(_SENTINEL)
            if start >= 0:
                end = self._buffer.find(_SENTINEL_END, start + len(_SENTINEL))
                if end >= 0:
                    output = self._buffer[:start]
                    code = int(self._buffer[start + len(_SENTINEL) : end])
                    self._buffer = self._buffer[end + 1 :]
                    return output.decode("utf-8", errors="replace"), code
            left = deadline - time.monotonic()
            if left <= 0:
                self.close()
                raise CommandTimeout(f"{command!r} ran past {self.command_timeout:g}s")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise RuntimeError(
                        f"the shell exited during {command!r}; output: {self._buffer!r}"
                    )
                self._buffer += chunk

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()


class BashSandbox:
    """One episode's real shell. Use as a context manager; :meth:`run` one command at a time."""

    def __init__(
        self,
        command_timeout: float = 10.0,
        scratch: Path | None = None,
        disk_bytes: int | None = None,
        world: SandboxWorld = LEGACY_WORLD,
        trace_state: bool = False,
    ):
        """``disk_bytes``: the sandbox's folders are on a tmpfs of that size (a disk that
        :meth:`fill_disk` can fill for real) instead of a folder on the host's disk.
        ``world``: the user, host, working directory, files and git history to build.
        ``trace_state``: follow the shell with strace, so :meth:`run_traced` can say what
        each command read and changed (``state_trace``)."""
        self.command_timeout = command_timeout
        self.world = world
        self._trace_state = trace_state
        self._trace: ShellTrace | None = None
        self._cwd = world.working_directory
        self._scratch = scratch
        self._disk_bytes = disk_bytes
        self._mounted = False
        self._root: Path | None = None
        self._shell: Shell | None = None

    def __enter__(self) -> BashSandbox:
        self._root = Path(tempfile.mkdtemp(prefix="aw-sandbox-", dir=self._scratch))
        if self._disk_bytes is not None:
            size = f"size={self._disk_bytes},mode=755"
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", size, "tmpfs", str(self._root)], check=True
            )
            self._mounted = True
        world = self.world
        # <root>/home is mounted on /home and <root>/srv on /srv: nothing of the host shows.
        (self._root / "srv").mkdir()
        home = self._host_path(world.home)
        home.mkdir(parents=True)
        (home / ".gitconfig").write_text(gitconfig_of(world))
        workdir = self._host_path(world.working_directory)
        workdir.mkdir(parents=True, exist_ok=True)
        if world.source is not None:
            try:
                copy_project(world.source, workdir)
            except OSError as exc:  # an unreadable file, a full disk: nothing left behind
                self.close()
                raise SandboxUnavailable(f"could not copy {world.source}: {exc}") from exc
        for name, content in world.files.items():
            target = workdir / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
            if name.endswith(".sh"):
                target.chmod(0o755)
        try:
            argv = sandboxed_command(
                self._root / "home",
                "/home",
                world.user,
                world.working_directory,
                environment_of(world),
                BASH,
                hostname=world.hostname,
                extra_mounts={str(self._root / "srv"): "/srv"},
            )
        except SandboxUnavailable:
            self.close()
            raise
        try:
            self._shell = Shell(argv, self.command_timeout)
            if world.git_commits:
                self._commit_history(world.git_commits)
            if (pinned := pinned_time(world)) is not None:
                self._pin_file_times(pinned)
            if self._trace_state:
                self._trace = attach(self._shell.pid, self._shell.run)
        except TraceUnavailable:
            self.close()
            raise
        except Exception as exc:
            self.close()
            raise SandboxUnavailable(f"the sandbox did not start: {exc}") from exc
        return self

    def _host_path(self, path: str) -> Path:
        """Where a sandbox path under /home or /srv lies on the host."""
        assert self._root is not None
        inside = Path(path)
        if inside.parts[1:2] not in (("home",), ("srv",)):
            raise UserInputError(f"{path}: a sandbox folder must be under /home or /srv")
        return self._root.joinpath(*inside.parts[1:])

    def _commit_history(self, commits: tuple[str, ...]) -> None:
        """The world's git history, made by its user before the episode starts: every file
        in the first commit, then one change per later commit (a line of ``HISTORY_FILE``,
        which ``SandboxWorld.built_files`` counts among the world's files)."""
        steps = ["git init -q", "git add -A", f"git commit -q -m {shlex.quote(commits[0])}"]
        for message in commits[1:]:
            steps += [
                f"echo {shlex.quote(message)} >> {HISTORY_FILE}",
                f"git add {HISTORY_FILE}",
                f"git commit -q -m {shlex.quote(message)}",
            ]
        output, code = self.run(" && ".join(steps))
        if code != 0:
            raise RuntimeError(f"could not build the git history: {output}")

    def _pin_file_times(self, pinned: int) -> None:
        """Every path of the home and the working directory, and the working directory's
        parent, dated at the world's date (what the session makes afterwards gets the real
        clock's time)."""
        output, code = self.run(
            f'find "$HOME" . -exec touch -h -d @{pinned} {{}} + '
            f"&& {{ touch -h -d @{pinned} .. 2>/dev/null || true; }}"  # not the user's: as it is
        )
        if code != 0:
            raise RuntimeError(f"could not date the world's files: {output}")

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- real world conditions, imposed from outside (as root on the host) between commands --

    def fill_disk(self) -> None:
        """Fill the sandbox's tmpfs /home to the last byte with a root-owned file (hidden in
        /home, outside the user's home): every later write by the user fails with ENOSPC."""
        if self._root is None or not self._mounted:
            raise RuntimeError("fill_disk needs a sandbox started with disk_bytes")
        chunk = b"\0" * 65536
        with (self._root / ".filler").open("wb", buffering=0) as fh:
            try:
                while True:
                    fh.write(chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise

    def make_read_only(self, path: str | None = None) -> None:
        """Remove the write permission of ``path`` (a path in the sandbox under /home or /srv;
        default the working directory) and of everything in it, for everyone."""
        path = path or self.world.working_directory
        if self._root is None:
            raise RuntimeError("the sandbox is not running")
        top = self._host_path(path)
        for folder, dirs, files in os.walk(top):
            for name in [*dirs, *files]:
                _drop_write(Path(folder) / name)
        _drop_write(top)

    def run(self, command: str) -> tuple[str, int]:
        """Run one command line in the episode's shell: (everything it printed, exit code)."""
        if self._shell is None:
            raise RuntimeError("the sandbox is not running")
        return self._shell.run(command)

    def run_traced(self, command: str) -> tuple[str, int, StepState]:
        """:meth:`run`, and what the command read of the world and changed in it (a sandbox
        started with ``trace_state``)."""
        if self._shell is None or self._trace is None:
            raise RuntimeError("the sandbox is not running with trace_state")
        mounts = self._mounts()
        before = take_snapshot(mounts)
        git_before = self._git_facts(before.repositories)
        marker, line = self._trace.next_marker()
        output, code = self._shell.run(command, after=line)
        lines = self._trace.lines_until(marker)
        if lines is None:
            raise TraceUnavailable(f"the trace of {command!r} did not end")
        seen = accesses_of(lines, self._shell.pid, self._cwd)
        after = take_snapshot(mounts)
        step = step_state(
            seen,
            before,
            after,
            roots=list(mounts),
            cwd=self._cwd,
            git_before=git_before,
            git_after=self._git_facts(after.repositories),
            skip=[f"{self.world.home}/.gitconfig"],
        )
        self._cwd = seen.shell_cwd or self._cwd
        return output, code, step

    def _mounts(self) -> dict[str, Path]:
        """The sandbox's own folders: where each lies on the host."""
        assert self._root is not None
        return {"/home": self._root / "home", "/srv": self._root / "srv"}

    def _git_facts(self, repositories: list[str]) -> dict[str, GitFacts]:
        return {r: git_facts(r, self._host_path(r)) for r in repositories}

    def close(self) -> None:
        trace, self._trace = self._trace, None
        if trace is not None:
            trace.close()
        shell, self._shell = self._shell, None
        if shell is not None:
            shell.close()
        root, self._root = self._root, None
        if root is not None:
            if self._mounted:
                subprocess.run(["umount", "--lazy", str(root)], check=False)
                self._mounted = False
            shutil.rmtree(root, ignore_errors=True)


def copy_project(source: Path, target: Path) -> None:
    """A real directory copied into ``target``: in a git work tree, the files git tracks or
    does not ignore (as `aw-mcp world from-dir` takes them), and the repository where
    ``source`` is its root; elsewhere every file. Links are copied as links."""
    listed = subprocess.run(
        [
            "git",
            "-c",
            "safe.directory=*",
            "-C",
            str(source),
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ],
        capture_output=True,
    )
    if listed.returncode != 0:  # not in a work tree (or no git): every file
        shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)
        return
    for name in sorted({n for n in listed.stdout.decode().split("\0") if n}):
        path = source / name
        if not path.is_symlink() and not path.is_file():
            continue  # tracked but deleted from the work tree, or a submodule
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target / name, follow_symlinks=False)
    if (source / ".git").is_dir():  # a folder inside a work tree has none to copy
        shutil.copytree(source / ".git", target / ".git", symlinks=True)


def _drop_write(path: Path) -> None:
    if not path.is_symlink():
        mode = path.stat().st_mode
        path.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def observation_text(output: str, exit_code: int) -> str:
    """The Terminal world's ``run_command`` observation: the output, then ``[exit code: N]``
    on its own last line (one trailing newline of the output is the line break before it)."""
    if not output:
        return f"[exit code: {exit_code}]"
    body = output[:-1] if output.endswith("\n") else output
    return f"{body}\n[exit code: {exit_code}]"
