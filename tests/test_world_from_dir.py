"""``aw-mcp world from-dir PATH``: a world whose state is a real directory.

Directories are built in tmp_path (a real ``git init`` repository where git is installed);
one test copies this repository's own checkout."""

from __future__ import annotations

import os
import shutil
import subprocess
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from aw_mcp.cli import main
from aw_mcp.domain import world_from_dir as module
from aw_mcp.domain.loader import load_domain, load_world
from aw_mcp.domain.world_from_dir import (
    EMPTY_FOLDER,
    IGNORED,
    JUNK,
    SECRET,
    DirWorld,
    FromDirOptions,
    world_from_dir,
)
from aw_mcp.files.yaml import parse_yaml_text
from aw_mcp.generation.worlds import from_world

REPO = Path(__file__).resolve().parents[1]
DAY = date(2026, 5, 4)
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

# Secret-looking values, put together here so the test file itself holds none whole.
AWS_KEY = "AKIA" + "Q" * 16
PRIVATE_KEY = "-----BEGIN " + "RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----\n"
GITHUB_TOKEN = "ghp_" + "a1B2" * 9
SLACK_TOKEN = "xoxb-" + "1234567890-abcdef"
GENERIC = "API_KEY=" + "s3cr3tv4lue99"


def make_dir(root: Path, files: dict[str, str | bytes]) -> Path:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


def copy(path: Path, **options: Any) -> DirWorld:
    return world_from_dir(FromDirOptions(path=path, **options), taken_on=DAY)


def facts(path: Path, **options: Any) -> dict[str, Any]:
    return copy(path, **options).world.facts


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


@pytest.fixture
def no_git_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """git reads only the repository's own config (not the machine's or the user's)."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "no-global-gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


# --- what is copied ------------------------------------------------------------------------


def test_small_text_files_are_copied_sorted_under_the_default_user_and_host(tmp_path: Path):
    project = make_dir(
        tmp_path / "shop", {"main.py": "print('hi')\n", "README.md": "# shop\n", "a/b.txt": ""}
    )
    got = facts(project)
    assert got["hostname"] == "devbox"
    assert got["user"] == "dev"
    assert got["home"] == "/home/dev"
    assert got["working_directory"] == "/home/dev/shop"
    assert got["files"] == {"README.md": "# shop\n", "a/b.txt": "", "main.py": "print('hi')\n"}
    assert list(got["files"]) == sorted(got["files"])
    assert "tree" not in got  # nothing was left out


def test_user_host_and_working_directory_can_be_named(tmp_path: Path):
    got = facts(make_dir(tmp_path / "p", {"x": "1"}), user="alice", hostname="ci-7")
    assert (got["user"], got["home"], got["hostname"]) == ("alice", "/home/alice", "ci-7")
    assert got["working_directory"] == "/home/alice/p"
    got = facts(tmp_path / "p", working_directory="/srv/app/")
    assert got["working_directory"] == "/srv/app"


def test_an_empty_directory_starts_empty_as_sandbox_worlds_say(tmp_path: Path):
    (tmp_path / "empty").mkdir()
    assert facts(tmp_path / "empty")["files"] == "none: /home/dev/empty starts empty"


def test_empty_folders_are_listed(tmp_path: Path):
    project = make_dir(tmp_path / "p", {"src/app.py": "x = 1\n"})
    (project / "logs").mkdir()
    assert facts(project)["tree"] == {"logs/": EMPTY_FOLDER}


# --- limits --------------------------------------------------------------------------------


def test_the_file_count_limit_keeps_the_shallowest_paths_and_counts_the_rest(tmp_path: Path):
    project = make_dir(
        tmp_path / "p",
        {"README.md": "r\n", "src/a.py": "a\n", "src/b.py": "b\n", "src/deep/c.py": "c\n",
         "zz.txt": "z\n"},
    )  # fmt: skip
    made = copy(project, max_files=4)  # README.md, src/, zz.txt, then src/a.py
    got = made.world.facts
    assert got["files"] == {"README.md": "r\n", "src/a.py": "a\n", "zz.txt": "z\n"}
    # src/ is listed because it holds paths the world does not list
    assert got["tree"] == {"src/": "folder of 3 paths, 2 not listed"}
    assert made.not_listed == 3  # src/b.py, src/deep/, src/deep/c.py
    partial = [n for n in made.world.notes if "listing is partial" in n]
    assert partial and "3 more files and folders" in partial[0]
    assert copy(project).not_listed == 0
    assert not [n for n in copy(project).world.notes if "partial" in n]


def test_a_folder_none_of_whose_paths_fit_is_listed_as_such(tmp_path: Path):
    project = make_dir(tmp_path / "p", {"a.txt": "a", "lib/x.py": "x", "lib/y.py": "y"})
    assert facts(project, max_files=2)["tree"] == {"lib/": "folder of 2 paths, none listed"}


def test_a_file_over_the_per_file_limit_is_listed_with_its_size(tmp_path: Path):
    project = make_dir(tmp_path / "p", {"big.txt": "x" * 5000, "fits.txt": "y" * 100})
    got = facts(project, max_file_bytes=100)
    assert got["files"] == {"fits.txt": "y" * 100}
    assert got["tree"] == {"big.txt": "5000 bytes (over the size limit)"}


def test_contents_stop_at_the_total_limit_and_the_rest_keep_their_size(tmp_path: Path):
    project = make_dir(tmp_path / "p", {"a.txt": "a" * 300, "b.txt": "b" * 300, "c.txt": "c" * 50})
    made = copy(project, max_total_bytes=400)
    assert made.world.facts["files"] == {"a.txt": "a" * 300, "c.txt": "c" * 50}
    assert made.world.facts["tree"] == {"b.txt": "300 bytes (content over the total limit)"}
    assert made.content_bytes == 350


def test_the_limits_applied_are_in_the_notes_with_the_date(tmp_path: Path):
    world = copy(make_dir(tmp_path / "shop", {"a": "1"}), max_files=7).world
    assert world.replace_notes is True
    text = " ".join(world.notes)
    assert "copy of a real directory, shop, taken on 2026-05-04 (UTC)" in text
    assert "at most 7 files and folders" in text
    assert "4096 bytes of content per file, 8192 bytes of content in all" in text


# --- binary, symlinks, unreadable ----------------------------------------------------------


def test_binary_files_are_listed_by_size(tmp_path: Path):
    project = make_dir(
        tmp_path / "p",
        {"logo.png": b"\x89PNG\r\n\x1a\n\0\0\0IHDR", "latin1.txt": "caf\xe9".encode("latin-1"),
         "big.bin": b"\0" * 20000, "utf8.txt": "café ☕\n"},
    )  # fmt: skip
    got = facts(project)
    assert got["files"] == {"utf8.txt": "café ☕\n"}
    assert got["tree"] == {
        "big.bin": "20000 bytes (binary)",
        "latin1.txt": "4 bytes (binary)",
        "logo.png": "15 bytes (binary)",
    }


def test_symlinks_are_listed_with_their_target_and_never_followed(tmp_path: Path):
    outside = make_dir(tmp_path / "outside", {"private.txt": "OUTSIDE CONTENT\n"})
    project = make_dir(tmp_path / "p", {"real.txt": "inside\n"})
    (project / "to-file").symlink_to(outside / "private.txt")
    (project / "to-dir").symlink_to(outside, target_is_directory=True)
    (project / "dangling").symlink_to("nowhere")
    (project / "local").symlink_to("real.txt")
    made = copy(project)
    assert made.world.facts["files"] == {"real.txt": "inside\n"}
    assert made.world.facts["tree"] == {
        "dangling": "symlink to nowhere",
        "local": "symlink to real.txt",
        "to-dir": f"symlink to {outside}",
        "to-file": f"symlink to {outside / 'private.txt'}",
    }
    assert "OUTSIDE CONTENT" not in str(made.world.model_dump())


def test_unreadable_files_and_special_files_are_listed_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    project = make_dir(tmp_path / "p", {"locked.txt": "no\n", "ok.txt": "yes\n"})
    os.mkfifo(project / "pipe")  # opening it would wait for a writer
    real_open = Path.open

    def open_refusing_locked(self: Path, *args: Any, **kwargs: Any) -> Any:
        if self.name == "locked.txt":
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, *args, **kwargs)

    (project / "locked-dir").mkdir()
    real_scandir = os.scandir

    def scandir_refusing_locked(path: Any) -> Any:
        if Path(path).name == "locked-dir":
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(Path, "open", open_refusing_locked)
    monkeypatch.setattr(module.os, "scandir", scandir_refusing_locked)
    got = facts(project)
    assert got["files"] == {"ok.txt": "yes\n"}
    assert got["tree"] == {
        "locked-dir/": "left out: cannot be read (Permission denied)",
        "locked.txt": "left out: cannot be read (Permission denied)",
        "pipe": "left out: not a regular file",
    }


# --- left out: secrets, junk, --exclude ----------------------------------------------------

SECRET_NAMED = {
    ".env": "DEBUG=1\n",
    ".env.production": "X=1\n",
    "server.pem": "pem\n",
    "tls/server.key": "key\n",
    "id_rsa": "k\n",
    "id_rsa.pub": "ssh-rsa AAAA\n",
    "cert.p12": "p\n",
    "cert.pfx": "p\n",
    ".netrc": "machine x\n",
    ".npmrc": "registry=x\n",
    ".pypirc": "[pypi]\n",
    "credentials.json": "{}\n",
    "config/client_secret.json": "{}\n",
    ".ssh/config": "Host *\n",
}


def test_files_named_like_secrets_are_listed_by_path_only(tmp_path: Path):
    project = make_dir(tmp_path / "p", {**SECRET_NAMED, "app.py": "x = 1\n"})
    made = copy(project)
    got = made.world.facts
    assert got["files"] == {"app.py": "x = 1\n"}
    # by path, no size; a folder named like one (.ssh) is not gone into
    expected = {name: SECRET for name in SECRET_NAMED if not name.startswith(".ssh/")}
    assert got["tree"] == {**expected, ".ssh/": SECRET}


def test_secrets_inside_folders_are_left_out_the_same(tmp_path: Path):
    project = make_dir(
        tmp_path / "p", {"config/client_secret.json": "{}\n", "config/app.ini": "a\n"}
    )
    got = facts(project)
    assert got["files"] == {"config/app.ini": "a\n"}
    assert got["tree"] == {"config/client_secret.json": SECRET}


def test_env_templates_are_copied_unless_their_content_looks_secret(tmp_path: Path):
    project = make_dir(
        tmp_path / "p", {".env.example": "DEBUG=1\n", ".env.sample": f"AWS_KEY={AWS_KEY}\n"}
    )
    got = facts(project)
    assert got["files"] == {".env.example": "DEBUG=1\n"}
    assert got["tree"] == {".env.sample": SECRET}


@pytest.mark.parametrize(
    "content",
    [
        f"aws_access_key_id = {AWS_KEY}\n",
        PRIVATE_KEY,
        f"export GH={GITHUB_TOKEN}\n",
        f"slack: {SLACK_TOKEN}\n",
        f"{GENERIC}\n",
        'config = {"password": "correct-horse-battery"}\n',
        "db:\n  token: abcdefgh12345678\n",
    ],
)
def test_files_whose_content_looks_like_a_secret_are_listed_by_path_only(
    tmp_path: Path, content: str
):
    project = make_dir(tmp_path / "p", {"settings.txt": content, "ok.txt": "max_tokens = 256\n"})
    made = copy(project)
    assert made.world.facts["files"] == {"ok.txt": "max_tokens = 256\n"}
    assert made.world.facts["tree"] == {"settings.txt": SECRET}
    assert content.strip().splitlines()[0] not in str(made.world.model_dump())


def test_include_secrets_copies_them_all(tmp_path: Path):
    files: dict[str, str | bytes] = {**SECRET_NAMED, "keys.txt": f"{AWS_KEY}\n{GITHUB_TOKEN}\n"}
    got = facts(make_dir(tmp_path / "p", files), include_secrets=True)
    assert got["files"] == dict(sorted(files.items()))
    assert "tree" not in got
    assert "secret" not in " ".join(copy(tmp_path / "p", include_secrets=True).world.notes)


def test_junk_folders_and_files_are_listed_without_going_in(tmp_path: Path):
    project = make_dir(
        tmp_path / "p",
        {"node_modules/left-pad/index.js": "x", "__pycache__/m.cpython-311.pyc": b"\0",
         ".venv/bin/python": "x", "venv/pyvenv.cfg": "x", "dist/p.whl": b"\0",
         "build/lib/p.py": "x", "p.egg-info/PKG-INFO": "x", "src/old.pyc": b"\0",
         ".DS_Store": b"\0", "src/app.py": "app\n"},
    )  # fmt: skip
    got = facts(project)
    assert got["files"] == {"src/app.py": "app\n"}
    assert got["tree"] == {
        ".DS_Store": JUNK,
        ".venv/": JUNK,
        "__pycache__/": JUNK,
        "build/": JUNK,
        "dist/": JUNK,
        "node_modules/": JUNK,
        "p.egg-info/": JUNK,
        "src/old.pyc": JUNK,
        "venv/": JUNK,
    }


def test_exclude_globs_match_paths_or_names_and_are_listed_as_left_out(tmp_path: Path):
    project = make_dir(
        tmp_path / "p",
        {"app.log": "l", "src/debug.log": "l", "docs/index.md": "d", "docs.txt": "t",
         "src/app.py": "a"},
    )  # fmt: skip
    got = facts(project, exclude=["*.log", "docs/"])
    assert got["files"] == {"docs.txt": "t", "src/app.py": "a"}
    assert got["tree"] == {
        "app.log": "left out: matches --exclude *.log",
        "docs/": "left out: matches --exclude docs/",
        "src/debug.log": "left out: matches --exclude *.log",
    }
    tree = facts(project, exclude=["src/*"])["tree"]
    assert tree == {
        "src/app.py": "left out: matches --exclude src/*",
        "src/debug.log": "left out: matches --exclude src/*",
    }


# --- determinism ---------------------------------------------------------------------------


def test_the_same_directory_gives_the_same_world_whatever_order_it_was_made_in(tmp_path: Path):
    files: dict[str, str | bytes] = {
        "b.txt": "b", "a/z.txt": "z", "a/y.bin": b"\0", "c/d/e.md": "e", "A.txt": "A"
    }  # fmt: skip
    first = make_dir(tmp_path / "one" / "p", files)
    second = make_dir(tmp_path / "two" / "p", dict(reversed(list(files.items()))))
    one, two = copy(first, max_files=5), copy(second, max_files=5)
    assert one.world.model_dump() == two.world.model_dump()
    assert one.world.model_dump() == copy(first, max_files=5).world.model_dump()


# --- git -----------------------------------------------------------------------------------


def make_repo(root: Path) -> Path:
    repo = make_dir(root, {"app.py": "print(1)\n", ".gitignore": "*.log\nout/\n"})
    git(repo, "init", "-q", "-b", "trunk")
    git(repo, "config", "user.name", "Ada Lovelace")
    git(repo, "config", "user.email", "ada@example.com")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "First")
    for subject in ("Second", "Third"):
        (repo / "app.py").write_text(f"print('{subject}')\n")
        git(repo, "commit", "-q", "-am", subject)
    make_dir(
        repo, {"server.log": "l\n", "out/result.txt": "r\n", "new.txt": "n\n", "café.txt": "c"}
    )
    (repo / "app.py").write_text("print('changed')\n")
    return repo


@needs_git
def test_a_git_repository_gives_branch_commits_working_tree_and_user(
    tmp_path: Path, no_git_config: None
):
    repo = make_repo(tmp_path / "repo")
    got = facts(repo)
    assert got["git"] == {
        "repository": "/home/dev/repo",
        "branch": "trunk",
        "commits": ["First", "Second", "Third"],
        "commit_count": 3,
        "working_tree": [" M app.py", "?? café.txt", "?? new.txt"],
        "user": "Ada Lovelace <ada@example.com>",
    }
    # ignored by git: listed, not copied; .git is never listed
    assert got["tree"] == {"out/": IGNORED, "server.log": IGNORED}
    assert set(got["files"]) == {".gitignore", "app.py", "café.txt", "new.txt"}
    assert not any(".git/" in path or path == ".git" for path in [*got["files"], *got["tree"]])
    assert facts(repo, max_commits=2)["git"]["commits"] == ["Second", "Third"]


@needs_git
def test_reading_the_repository_writes_nothing_in_it(tmp_path: Path, no_git_config: None):
    repo = make_repo(tmp_path / "repo")

    def state() -> dict[str, tuple[int, int]]:
        return {
            str(p.relative_to(repo)): (p.stat().st_mtime_ns, p.stat().st_size)
            for p in sorted(repo.rglob("*"))
        }

    before = state()
    facts(repo)
    assert state() == before


@needs_git
def test_a_fresh_repository_and_one_without_a_user(tmp_path: Path, no_git_config: None):
    repo = make_dir(tmp_path / "fresh", {"a.txt": "a\n"})
    git(repo, "init", "-q", "-b", "main")
    got = facts(repo)["git"]
    assert (got["branch"], got["commits"], got["commit_count"]) == ("main", [], 0)
    assert got["working_tree"] == ["?? a.txt"]
    assert got["user"] == "not set"


@needs_git
def test_a_plain_folder_and_a_folder_inside_a_repository_say_so(tmp_path: Path):
    plain = make_dir(tmp_path / "plain", {"a.txt": "a"})
    assert facts(plain)["git"] == "/home/dev/plain is not a git repository"
    repo = make_repo(tmp_path / "repo")
    got = facts(repo / "out")  # a subfolder (ignored or not, it is inside the repository)
    assert isinstance(got["git"], str)
    assert "is the folder out of a git repository (branch trunk)" in got["git"]


def test_without_git_the_git_fact_says_it_is_not_known(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(module.shutil, "which", lambda name: None)
    project = make_dir(tmp_path / "p", {".git/HEAD": "ref: refs/heads/main\n", "a.txt": "a"})
    got = facts(project)
    assert "git was not installed" in got["git"]
    assert got["files"] == {"a.txt": "a"}  # .git is never copied
    assert "not a git repository" in facts(make_dir(tmp_path / "q", {"a": "a"}))["git"]


# --- the world file: serve --world, from_world, the command line ---------------------------

TRICKY = {
    "crlf.txt": "one\r\ntwo\r\n",
    "trailing.txt": "spaces   \nand tabs\t\n",
    "indented.py": "    starts indented\n\tand a tab\n",
    "docs/--- yaml.md": "---\nkey: value\n...\n",
    "unicode.txt": "naïve ☕ ünïcödé\n",
    "nel.txt": "next line\x85 is a line break to YAML\n",
    "breaks.txt": "LS\u2028 PS\u2029 BOM\ufeff\n",
    "ansi.txt": "\x1b[31mred\x1b[0m\n",
    "no-newline.txt": "last line",
    "empty.txt": "",
    "colon: name.txt": "a: b\n",
}


@needs_git
def test_the_world_file_round_trips_through_serve_world_and_from_world(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_git_config: None
):
    repo = make_repo(tmp_path / "repo")
    make_dir(repo, TRICKY)
    out = tmp_path / "world.yaml"
    code, stdout, err = run_cli(["world", "from-dir", str(repo), "-o", str(out)], capsys)
    assert code == 0
    assert stdout == ""
    assert err.startswith(f"wrote {out}: ")
    world = load_world(out)  # what serve --world loads
    load_domain("terminal").world.merged(world)
    sandbox = from_world(world)
    assert sandbox.files == world.facts["files"]
    assert {k: sandbox.files[k] for k in TRICKY} == TRICKY  # byte for byte
    assert sandbox.git_commits == ("First", "Second", "Third")
    assert (sandbox.user, sandbox.hostname) == ("dev", "devbox")
    assert sandbox.working_directory == "/home/dev/repo"


def test_the_printed_world_is_the_written_one_and_parses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    project = make_dir(tmp_path / "p", {"a.txt": "a\nb\n"})
    code, printed, _ = run_cli(["world", "from-dir", str(project)], capsys)
    assert code == 0
    assert printed.startswith("# World facts of the directory p as /home/dev/p.\n")
    assert "aw-mcp serve --simulator terminal --world THIS_FILE" in printed
    world = parse_yaml_text(printed, module.WorldSpec, "stdout")
    assert world.facts["files"] == {"a.txt": "a\nb\n"}
    run_cli(["world", "from-dir", str(project), "-o", str(tmp_path / "w.yaml")], capsys)
    written = (tmp_path / "w.yaml").read_text(encoding="utf-8")
    today = [n for n in world.notes if "taken on" in n]
    assert today and today[0] in parse_yaml_text(written, module.WorldSpec, "w").notes
    assert written == printed  # same directory, same day: the same file


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["{tmp}/missing"], "{tmp}/missing: no such directory"),
        (["{tmp}/file.txt"], "{tmp}/file.txt: not a directory"),
    ],
)
def test_a_path_that_is_no_directory_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
):
    (tmp_path / "file.txt").write_text("x")
    args = [a.format(tmp=tmp_path) for a in argv]
    code, out, err = run_cli(["world", "from-dir", *args], capsys)
    assert code == 2
    assert out == ""
    assert err == f"aw-mcp: {message.format(tmp=tmp_path)}\n"


def test_bad_options_are_refused_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    code, _, err = run_cli(
        ["world", "from-dir", str(tmp_path), "--working-directory", "relative/dir"], capsys
    )
    assert code == 2
    assert "--working-directory: must be an absolute path" in err
    code, _, err = run_cli(["world", "from-dir", str(tmp_path), "--max-files", "0"], capsys)
    assert code == 2
    assert "--max-files" in err


def test_a_world_too_large_for_the_default_context_window_is_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    project = make_dir(tmp_path / "p", {f"f{i:02}.txt": "word " * 200 for i in range(30)})
    code, _, err = run_cli(["world", "from-dir", str(project)], capsys)
    assert code == 0
    assert "warning" not in err  # the default limits fit serve's default --n-ctx
    big = ["--max-total-bytes", "100000"]
    code, _, err = run_cli(["world", "from-dir", str(project), *big], capsys)
    assert code == 0
    assert "aw-mcp: warning: the world's facts are about" in err
    assert "serve it with a larger --n-ctx" in err


@needs_git
def test_this_repository_copies_its_readme_and_its_git_state(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    if not (REPO / ".git").exists():
        pytest.skip("this checkout is not a git repository")
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    size = str(len(readme.encode()))
    out = tmp_path / "self.yaml"
    argv = ["world", "from-dir", str(REPO), "-o", str(out), "--max-file-bytes", size]
    code, _, err = run_cli([*argv, "--max-total-bytes", str(2 * int(size))], capsys)
    assert code == 0, err
    world = load_world(out)
    assert world.facts["files"]["README.md"] == readme
    git_fact = world.facts["git"]
    assert isinstance(git_fact, dict)
    assert isinstance(git_fact["branch"], str) and git_fact["branch"]
    assert git_fact["commits"]
    assert from_world(world).files["README.md"] == readme


# --- the state a served episode starts from -------------------------------------------------


def test_the_episode_state_knows_every_path_the_copy_lists(tmp_path: Path):
    """WorldState.from_facts reads the tree fact in the words this module writes it: sizes,
    links, empty and partly listed folders, paths left out by name."""
    from aw_mcp.state.world import WorldState

    project = make_dir(
        tmp_path / "p",
        {"README.md": "hello\n", "logo.png": b"\x89PNG\r\n\x1a\n\0\0\0IHDR", ".env": "x",
         "node_modules/left-pad/index.js": "x", "lib/a.py": "a\n", "lib/b.py": "b\n",
         "lib/c.py": "c\n", "zz/one.txt": "1\n"},
    )  # fmt: skip
    (project / "empty").mkdir()
    (project / "link").symlink_to("README.md")
    got = facts(project, max_files=9)  # the top level and lib/a.py
    assert got["tree"]["lib/"] == "folder of 3 paths, 2 not listed"
    assert got["tree"]["zz/"] == "folder of 1 paths, none listed"
    state = WorldState.from_facts(got)
    assert state is not None
    here = "/home/dev/p"

    def known(path: str) -> Any:
        return state.state_of(f"{here}/{path}")

    assert known("README.md").content == "hello\n"
    assert (known("logo.png").kind, known("logo.png").size) == ("file", 15)
    assert (known(".env").kind, known(".env").size) == ("file", None)
    assert (known("link").kind, known("link").target) == ("link", "README.md")
    assert (known("empty").kind, known("empty").entries, known("empty").unlisted) == (
        "dir", [], None,
    )  # fmt: skip
    lib = known("lib")
    assert (lib.entries, lib.unlisted) == (["a.py"], "2 more, not listed")
    assert (known("zz").entries, known("zz").unlisted) == ([], "1 more, not listed")
    modules = known("node_modules")
    assert modules.kind == "dir" and modules.unlisted == f"entries not listed ({JUNK})"
    assert state.entries(here) == [
        ".env", "README.md", "empty/", "lib/", "link", "logo.png", "node_modules/", "zz/",
    ]  # fmt: skip
    # what stands next to `ls lib` says that the listing is partial
    view = state.view({"command": "ls lib"})
    assert "dir lib\n|a.py\n... 2 more, not listed" in view
