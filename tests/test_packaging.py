"""The wheel carries the bundled domains and fault samples (they live outside src/) and the
viewer's templates."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT


@pytest.mark.slow
def test_an_installed_wheel_finds_its_bundled_data(tmp_path):
    wheels, target = tmp_path / "wheels", tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "-w",
            str(wheels),
            str(REPO_ROOT),
        ],
        check=True,
        timeout=300,
    )
    (wheel,) = wheels.glob("aw_mcp-*.whl")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        timeout=300,
    )
    probe = (
        "import aw_mcp, aw_mcp.files.bundled as d;"
        "print(aw_mcp.__file__); print(d.bundled_dir('simulators'));"
        "print(d.bundled_dir('faults')); import aw_mcp.models.adapters as a;"
        "print(a.bundled_adapters()[0])"
    )
    env = {**os.environ, "PYTHONPATH": str(target)}  # the installed copy wins over the checkout
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=True,
    ).stdout.split()
    assert all(line.startswith(str(target)) for line in out), out
    listed = subprocess.run(
        [sys.executable, "-m", "aw_mcp", "simulators"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=True,
    ).stdout
    assert "terminal" in listed
    # The viewer's templates are package data: the installed copy renders a report.
    records = tmp_path / "records"
    records.mkdir()
    heldout = REPO_ROOT / "tests" / "data" / "real_terminal"
    first = sorted(heldout.glob("*.jsonl"))[0]
    (records / first.name).write_bytes(first.read_bytes())
    subprocess.run(
        [sys.executable, "-m", "aw_mcp", "view", str(records), "--out", "page.html"],
        env=env,
        cwd=tmp_path,
        check=True,
        timeout=120,
    )
    assert 'class="timeline"' in (tmp_path / "page.html").read_text()
