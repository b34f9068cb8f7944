"""Worlds that vary: every generated Terminal episode runs in a machine of its own.

A model trained in one world learns that world by heart (its user, its empty project) and
stops reading the world facts in its prompt. So each episode draws a :class:`SandboxWorld`
(user, host name, working directory, the project's files and contents, whether it is a git
repository and its commits), the sandbox is built to match it, and the facts the episode is
served and trained with are written from it, with the measured truths of the machine (OS,
shell, tool versions). The bundled Terminal world is one of the worlds: its facts
(``simulators/terminal.yaml``) are read back into a :class:`SandboxWorld` and built for real,
so plain ``aw-mcp serve`` has been trained on the world it describes.

Held-out worlds: the held-out split draws its users, hosts and project names from pools that
training never uses.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from aw_mcp.domain.models import WorldSpec
from aw_mcp.errors import UserInputError
from aw_mcp.generation.terminal_scripts import Split

HISTORY_FILE = "CHANGES"  # what each commit after the first adds a line to


@dataclass(frozen=True)
class SandboxWorld:
    """What one episode's machine looks like before its first command."""

    user: str
    hostname: str
    working_directory: str  # under /home/<user> or /srv
    files: dict[str, str] = field(default_factory=dict)  # relative to working_directory
    git_commits: tuple[str, ...] = ()  # empty: not a git repository
    kind: str = "drawn"  # "bundled" for the bundled domain's own world
    # The world's clock as its facts give it ("2026-11-30 09:00 UTC"): the files' times and
    # every commit's date are pinned to it, so `ls -l` and `git log` print the same on
    # every run. None: the real clock.
    date: str | None = None
    # A real directory whose copy is the working directory (what git does not ignore, and
    # its .git), in place of ``files`` and ``git_commits``: the machine of a world that
    # `aw-mcp world from-dir` made of it, as its facts only sketch it (sizes, folders not
    # listed, the last commits).
    source: Path | None = None

    @property
    def home(self) -> str:
        return f"/home/{self.user}"

    @property
    def git_identity(self) -> tuple[str, str]:
        return self.user.title(), f"{self.user}@{self.hostname}"

    def built_files(self) -> dict[str, str]:
        """Every file the working directory holds once built: the world's files, and the
        ``CHANGES`` file its history writes (a line per commit after the first)."""
        files = dict(self.files)
        if len(self.git_commits) > 1:
            files[HISTORY_FILE] = "".join(f"{m}\n" for m in self.git_commits[1:])
        return files

    def facts(self) -> dict[str, Any]:
        """The built facts, in the shape of a domain's ``world.facts`` (``from_world``
        reads them back)."""
        name, email = self.git_identity
        files = self.built_files()
        facts: dict[str, Any] = {
            "hostname": self.hostname,
            "user": self.user,
            "home": self.home,
            "working_directory": self.working_directory,
            "files": files if files else f"none: {self.working_directory} starts empty",
        }
        if self.git_commits:
            facts["git"] = {
                "repository": self.working_directory,
                "branch": "main",
                "commits": list(self.git_commits),
                "working_tree": "clean",
                "user": f"{name} <{email}>",
            }
        else:
            facts["git"] = (
                f"{self.working_directory} is not a git repository (git user {name} <{email}>; "
                "new repositories start on branch main)"
            )
        if self.date:
            facts["date"] = self.date
        return facts


def from_world(world: WorldSpec, source: Path | None = None) -> SandboxWorld:
    """The sandbox a world file's facts describe (the bundled Terminal world's, a --world);
    with ``source``, its working directory is a copy of that real directory instead of the
    files and history the facts give (a world `aw-mcp world from-dir` made of it)."""
    facts = world.facts
    missing = [k for k in ("hostname", "user", "working_directory") if k not in facts]
    if missing:
        raise UserInputError(f"the world does not say its {', '.join(missing)}")
    machine = SandboxWorld(
        user=str(facts["user"]).split()[0],
        hostname=str(facts["hostname"]),
        working_directory=str(facts["working_directory"]),
        kind="bundled",
        date=facts["date"] if isinstance(facts.get("date"), str) else None,
    )
    if source is not None:
        if not source.is_dir():
            raise UserInputError(f"{source} is not a directory")
        return replace(machine, source=source)
    files = facts.get("files")
    git = facts.get("git")
    commits = tuple(git.get("commits") or ()) if isinstance(git, dict) else ()
    if isinstance(files, dict) and len(commits) > 1:
        # The history writes it again, commit by commit (``built_files``).
        files = {k: v for k, v in files.items() if k != HISTORY_FILE}
    files = {str(k): str(v) for k, v in files.items()} if isinstance(files, dict) else {}
    return replace(machine, files=files, git_commits=commits)


# --- drawing ------------------------------------------------------------------------------

_USERS: dict[Split, list[str]] = {
    "train": ["dev", "alice", "sam", "maria", "deploy", "chen", "app", "kim", "omar", "lucas"],
    "heldout": ["bob", "priya", "ops", "nina"],
}
_HOSTS: dict[Split, list[str]] = {
    "train": [
        "devbox",
        "web-01",
        "ci-runner",
        "laptop",
        "build-7",
        "api-server",
        "ml-node",
        "workstation",
        "sandbox",
        "db-02",
    ],
    "heldout": ["staging-3", "edge", "batch-host", "pi"],
}
_PROJECTS: dict[Split, list[str]] = {
    "train": ["project", "app", "webapp", "service", "tools", "site", "api", "work", "repo"],
    "heldout": ["backend", "infra", "demo"],
}
_PACKAGES = ["flask==3.0.3", "requests==2.32.3", "pyyaml==6.0.2", "click==8.1.7", "rich==13.9.4"]
_PEOPLE = ["alice", "bob", "carol", "dave", "erin", "frank", "grace"]
_FRUITS = ["apple", "banana", "cherry", "grape", "lemon", "mango", "pear", "plum"]


def _python_app(rng: random.Random, name: str) -> dict[str, str]:
    port = rng.choice([5000, 8000, 8080, 3000])
    route = rng.choice(["hello", "health", "status", "items"])
    deps = rng.sample(_PACKAGES[1:], rng.randint(0, 2))
    return {
        "README.md": f"# {name}\n\nA small Flask app. Run: python3 main.py\n",
        "main.py": (
            "from flask import Flask\n\napp = Flask(__name__)\n\n\n"
            f'@app.route("/{route}")\ndef {route}():\n    return "ok"\n\n\n'
            f'if __name__ == "__main__":\n    app.run(port={port})\n'
        ),
        "requirements.txt": "\n".join(["flask==3.0.3", *deps]) + "\n",
        "tests/test_main.py": (
            f"from main import app\n\n\ndef test_{route}():\n"
            f'    assert app.test_client().get("/{route}").status_code == 200\n'
        ),
    }


def _node_app(rng: random.Random, name: str) -> dict[str, str]:
    version = f"{rng.randint(0, 2)}.{rng.randint(0, 9)}.{rng.randint(0, 9)}"
    return {
        "package.json": (
            f'{{\n  "name": "{name}",\n  "version": "{version}",\n  "main": "index.js",\n'
            '  "scripts": {\n    "start": "node index.js"\n  }\n}\n'
        ),
        "index.js": f"console.log('{name} v{version} ready');\n",
        "README.md": f"# {name}\n\nStart with: npm start\n",
    }


def _data_folder(rng: random.Random, name: str) -> dict[str, str]:
    people = rng.sample(_PEOPLE, rng.randint(3, 5))
    rows = [f"{p},{rng.choice(_FRUITS)},{rng.randint(1, 40)}" for p in people]
    notes = rng.sample(_FRUITS, 3)
    return {
        "data.csv": "name,fruit,count\n" + "\n".join(rows) + "\n",
        "notes.txt": "\n".join(f"buy {n}" for n in notes) + "\n",
        "README.md": f"# {name}\n\nData files.\n",
    }


def _scripts_folder(rng: random.Random, name: str) -> dict[str, str]:
    target = rng.choice(["backup", "build", "deploy"])
    return {
        f"{target}.sh": f"#!/bin/bash\nset -e\necho '{target} of {name} done'\n",
        "Makefile": f"all:\n\t@echo building {name}\n",
        "config.ini": f"[main]\nname = {name}\nretries = {rng.randint(1, 5)}\n",
    }


_KINDS = [_python_app, _node_app, _data_folder, _scripts_folder]
_COMMITS = ["Initial commit", "Add README", "Add tests", "Fix typo", "Update config"]


def draw_world(split: Split, rng: random.Random) -> SandboxWorld:
    """One drawn world: about a fifth start empty, half of the rest are git repositories."""
    user = rng.choice(_USERS[split])
    project = rng.choice(_PROJECTS[split])
    workdir = rng.choice(
        [f"/home/{user}/{project}", f"/home/{user}/{project}", f"/home/{user}", f"/srv/{project}"]
    )
    files = {} if rng.random() < 0.2 else rng.choice(_KINDS)(rng, project)
    commits: tuple[str, ...] = ()
    if files and workdir != f"/home/{user}" and rng.random() < 0.6:
        commits = ("Initial commit", *rng.sample(_COMMITS[1:], rng.randint(0, 2)))
    return SandboxWorld(
        user=user,
        hostname=rng.choice(_HOSTS[split]),
        working_directory=workdir,
        files=files,
        git_commits=commits,
    )


def world_spec(world: SandboxWorld, measured: dict[str, Any], notes: list[str]) -> WorldSpec:
    """The whole world an episode is served with: built facts, measured facts, notes."""
    return WorldSpec(facts={**world.facts(), **measured}, notes=notes, replace_notes=True)
