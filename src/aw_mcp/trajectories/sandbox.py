"""A throwaway real bash for the trajectory generator: the Terminal world's machine, for real.

Each sandbox is one persistent ``bash`` process running as the unprivileged user ``dev`` in a
private mount and UTS namespace (``unshare``), so the world model's facts hold literally:

- a fresh directory on disk is bind-mounted over ``/home``, holding only ``/home/dev`` with a
  ``.gitconfig`` and an EMPTY ``project/``; nothing of one episode survives into the next;
- the host name is ``devbox``; HOME, USER, PATH, LANG=C, TZ=UTC and umask 022 are fixed;
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
import os
import select
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from pathlib import Path

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
GITCONFIG = f"[user]\n\tname = {GIT_NAME}\n\temail = {GIT_EMAIL}\n[init]\n\tdefaultBranch = main\n"

# Runs as root inside the new namespaces: hands what is in the prepared folder to the user,
# mounts it,
# then becomes the user and runs the command. Arguments: root, mount point, user, working
# directory, host name, then `env` assignments and the command (after `--`).
_SETUP = """set -e
root="$1"; mount_at="$2"; user="$3"; workdir="$4"; host="$5"; shift 5
find "$root" -mindepth 1 -exec chown "$user:$user" {} +
chmod 755 "$root"
mount --bind "$root" "$mount_at"
hostname "$host"
cd "$workdir"
umask 022
exec setpriv --reuid "$user" --regid "$user" --init-groups env -i "$@"
"""

_SENTINEL = b"\x1eAW-END:"
_SENTINEL_END = b"\x1e"
# Prompts off, history expansion off ('!' stays literal), then one sentinel to sync on.
_INIT = "PS1=; PS2=; PS0=; unset PROMPT_COMMAND; set +H"


class SandboxUnavailable(RuntimeError):
    """This machine cannot host the sandbox (not root, or no user namespaces / unshare)."""


class CommandTimeout(RuntimeError):
    """A command did not finish within the per-command timeout; the sandbox is gone."""


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
) -> list[str]:
    """The argv that runs ``command`` as ``user`` with ``root`` mounted at ``mount_at`` (which
    must exist on the host) in private mount and UTS namespaces. What ``root`` holds is
    handed to ``user``; the environment is exactly ``env``."""
    ensure_user(user)
    if not Path(mount_at).is_dir():
        raise SandboxUnavailable(f"the mount point {mount_at} does not exist on this machine")
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
        *(f"{k}={v}" for k, v in env.items()),
        *command,
    ]


class BashSandbox:
    """One episode's real shell. Use as a context manager; :meth:`run` one command at a time."""

    def __init__(
        self,
        command_timeout: float = 10.0,
        scratch: Path | None = None,
        disk_bytes: int | None = None,
    ):
        """``disk_bytes``: /home is a tmpfs of that size (a disk that :meth:`fill_disk` can
        fill for real) instead of a folder on the host's disk."""
        self.command_timeout = command_timeout
        self._scratch = scratch
        self._disk_bytes = disk_bytes
        self._mounted = False
        self._root: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._buffer = b""

    def __enter__(self) -> BashSandbox:
        self._root = Path(tempfile.mkdtemp(prefix="aw-sandbox-", dir=self._scratch))
        if self._disk_bytes is not None:
            size = f"size={self._disk_bytes},mode=755"
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", size, "tmpfs", str(self._root)], check=True
            )
            self._mounted = True
        home = self._root / USER
        (home / "project").mkdir(parents=True)
        (home / ".gitconfig").write_text(GITCONFIG)
        try:
            argv = sandboxed_command(
                self._root,
                "/home",
                USER,
                PROJECT,
                ENVIRONMENT,
                ["bash", "--noprofile", "--norc", "--noediting", "-i"],
            )
        except SandboxUnavailable:
            self.close()
            raise
        self._proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # one process group to kill on a timeout
        )
        try:
            self.run(_INIT)  # what bash printed at start-up (job-control warnings) is dropped
        except Exception as exc:
            self.close()
            raise SandboxUnavailable(f"the sandbox did not start: {exc}") from exc
        return self

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

    def make_read_only(self, path: str = PROJECT) -> None:
        """Remove the write permission of ``path`` (a path in the sandbox under /home) and of
        everything in it, for everyone."""
        if self._root is None:
            raise RuntimeError("the sandbox is not running")
        top = self._root / Path(path).relative_to("/home")
        for folder, dirs, files in os.walk(top):
            for name in [*dirs, *files]:
                _drop_write(Path(folder) / name)
        _drop_write(top)

    def run(self, command: str) -> tuple[str, int]:
        """Run one command line in the episode's shell: (everything it printed, exit code)."""
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise RuntimeError("the sandbox is not running")
        # A group, so `cd` and variables stay in this shell; stdin from /dev/null, so a command
        # that reads input cannot swallow the next command.
        # The sentinel goes on its own line: an expansion error aborts the rest of its line.
        script = f"{{ {command}\n}} </dev/null\nprintf '\\036AW-END:%d\\036' \"$?\"\n"
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
        root, self._root = self._root, None
        if root is not None:
            if self._mounted:
                subprocess.run(["umount", "--lazy", str(root)], check=False)
                self._mounted = False
            shutil.rmtree(root, ignore_errors=True)


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
