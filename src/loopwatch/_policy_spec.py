"""Which policy to run, as a preset name and a configuration file, the same way for every program that builds one:
the ``loopwatch`` commands, the service, the Claude Code hook and the MCP proxy.

The configuration file is the one given, else the nearest ``loopwatch.toml`` (or ``pyproject.toml`` with a
``[tool.loopwatch]`` table) in the working directory or its parents, unless told to use none. A
:class:`PolicySpec` is small and picklable, so a worker process rebuilds the same policy from it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

TYPE_CHECKING = False
if TYPE_CHECKING:  # loading the policy's modules waits for build(): a hook process imports this on every run
    from .core._policy import Policy

__all__ = ["PolicySpec", "config_path"]


def config_path(config: str | None, no_config: bool = False, start: str = ".") -> str | None:
    """The configuration file to use: ``config`` when given, else the nearest one found from ``start`` upwards
    (``None`` with ``no_config``, or when there is none)."""
    if config:
        return config
    if no_config:
        return None
    from ._config_file import find_config_file  # the search alone: no TOML parsing, argparse or pathlib

    return find_config_file(start)


@dataclass(frozen=True)
class PolicySpec:
    """How to build the policy in any process: a ``preset`` name and/or a ``config`` file (its path).

    With a configuration file, ``preset`` (when given) replaces the file's own preset; without one, the policy
    is ``preset``, else ``default`` (the preset used when nobody names one).
    """

    preset: str | None = None
    config: str | None = None
    default: str = "default"

    @classmethod
    def found(
        cls,
        preset: str | None,
        config: str | None,
        no_config: bool = False,
        *,
        default: str = "default",
        start: str = ".",
    ) -> PolicySpec:
        """The spec of a command's ``--preset``, ``--config`` and ``--no-config``: the configuration file is
        ``config``, else the nearest one from ``start`` upwards (none with ``no_config``)."""
        return cls(preset, config_path(config, no_config, start), default)

    def build(self) -> Policy:
        """The policy (raises :class:`~loopwatch.errors.ConfigError` for a bad file or an unknown preset)."""
        if self.config:
            from .config import load_config

            loaded = load_config(self.config)
            if self.preset:
                loaded = replace(loaded, preset=self.preset)
            return loaded.policy()
        from ._presets import preset

        return preset(self.preset or self.default)
