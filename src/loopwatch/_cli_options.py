"""Options shared by every ``loopwatch`` command, so each is spelled, explained and shown the same way everywhere
(``--preset NAME``, ``--config FILE``, ``--no-config``, ``--store URL``, ``--json``, ``--audit FILE``): the command
line's (:mod:`loopwatch.cli`), the Claude Code hook's, the MCP proxy's and the service's, which is why they live
outside the command line's package. The configuration file they name is found by :mod:`loopwatch._policy_spec`,
the same way everywhere.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ._presets import PRESETS

if TYPE_CHECKING:  # a hook process finds its configuration here without loading argparse
    import argparse

PRESET_HELP: Final = f"policy preset: {', '.join(PRESETS)} (default: {{default}}, or the configuration's)"
CONFIG_HELP: Final = (
    "a loopwatch.toml, or a pyproject.toml with [tool.loopwatch] (default: the nearest one in the working "
    "directory or its parents)"
)


def add_policy_options(parser: argparse.ArgumentParser, *, default_preset: str = "default") -> None:
    """``--preset NAME``, ``--config FILE`` and ``--no-config``."""
    parser.add_argument("--preset", metavar="NAME", default=None, help=PRESET_HELP.format(default=default_preset))
    parser.add_argument("--config", metavar="FILE", default=None, help=CONFIG_HELP)
    parser.add_argument(
        "--no-config", action="store_true", help="use no configuration file (not even one found in the directory)"
    )


def add_store_option(
    parser: argparse.ArgumentParser, *, help: str, default: str | None = None, required: bool = False
) -> None:
    """``--store URL``."""
    parser.add_argument("--store", metavar="URL", default=default, required=required, help=help)


def add_json_option(parser: argparse.ArgumentParser, what: str = "as JSON") -> None:
    """``--json``."""
    parser.add_argument("--json", action="store_true", help=what)


def add_audit_option(parser: argparse.ArgumentParser) -> None:
    """``--audit FILE``."""
    parser.add_argument("--audit", metavar="FILE", default=None, help="append the audit records (JSON lines) to FILE")
