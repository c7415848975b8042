"""The TypeScript client (clients/typescript): built with tsc and tested with Node's own test runner against a real
``loopwatch serve`` process started by its tests. Skipped, with the reason, when node or npm is missing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CLIENT = Path(__file__).resolve().parents[1] / "clients" / "typescript"

pytest.importorskip("starlette")


def test_the_typescript_client_passes_its_node_tests() -> None:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node and npm are needed to build and test the TypeScript client (clients/typescript)")
    if not (CLIENT / "node_modules" / "typescript").is_dir():
        installed = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"], cwd=CLIENT, capture_output=True, text=True, timeout=600
        )
        assert installed.returncode == 0, installed.stdout + installed.stderr
    env = {**os.environ, "LOOPWATCH_PYTHON": sys.executable}
    done = subprocess.run([npm, "test"], cwd=CLIENT, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    assert "# fail 0" in done.stdout and "# pass 6" in done.stdout, done.stdout[-3000:]
