"""MkDocs hooks (mkdocs.yml ``hooks:``): the pages generated from the repository at build time.

- ``reference/configuration.md``: the configuration reference, from loopwatch's code (tools/config_reference.py);
- ``changelog.md``: CHANGELOG.md, so the site and the repository show the same text.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from config_reference import page  # noqa: E402


def on_files(files: Files, config: Any) -> Files:
    files.append(File.generated(config, "reference/configuration.md", content=page()))
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    files.append(File.generated(config, "changelog.md", content=changelog))
    return files
