"""loopwatch: catch LLM agents stuck in loops and get them out."""

from __future__ import annotations

__version__ = "0.1.0"
