"""Finding the configuration file, with the standard library's ``os`` alone: a hook process looks for one on every
run, and most runs find none (parsing TOML, and :mod:`loopwatch.config` with it, is loaded only for a
``pyproject.toml`` that mentions loopwatch)."""

from __future__ import annotations

import os

CONFIG_FILE = "loopwatch.toml"
PYPROJECT_FILE = "pyproject.toml"


def find_config_file(start: str | os.PathLike[str] = ".") -> str | None:
    """The nearest ``loopwatch.toml``, or ``pyproject.toml`` with ``[tool.loopwatch]``, in ``start`` or above.

    In one directory ``loopwatch.toml`` wins; ``None`` when no directory up to the root has either.
    """
    here = os.path.realpath(start)
    if os.path.isfile(here):
        here = os.path.dirname(here)
    while True:
        found = _config_in(here)
        if found is not None:
            return found
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def _config_in(directory: str) -> str | None:
    candidate = os.path.join(directory, CONFIG_FILE)
    if os.path.isfile(candidate):
        return candidate
    pyproject = os.path.join(directory, PYPROJECT_FILE)
    if os.path.isfile(pyproject) and _declares_loopwatch(pyproject):
        return pyproject
    return None


def _declares_loopwatch(pyproject: str) -> bool:
    try:
        with open(pyproject, encoding="utf-8") as file:
            text = file.read()
    except (OSError, UnicodeDecodeError):
        return False
    if "loopwatch" not in text:  # most pyproject files: no need to parse them
        return False
    from .config import _pyproject_declares

    return _pyproject_declares(text, pyproject)
