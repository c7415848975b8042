"""Fixtures shared by several test modules."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from loopwatch import Guard
from loopwatch.adapters.claude_code_server import HookServer, make_server


@pytest.fixture
def server(tmp_path: Path) -> Iterator[HookServer]:
    """A Claude Code hook service (``--serve``) on a free local port, its sessions in a SQLite file."""
    guard = Guard("default-lexical", store=f"sqlite:///{tmp_path}/served.db", clock=None)
    service = make_server(guard, port=0)
    thread = threading.Thread(target=service.serve_forever, daemon=True)
    thread.start()
    yield service
    service.shutdown()
    service.server_close()
