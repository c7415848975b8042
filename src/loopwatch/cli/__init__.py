"""The ``loopwatch`` command line: ``scan``, ``eval``, ``explain`` and ``sessions``, and the way to ``hook``,
``mcp-proxy`` and ``serve``. It drives the engine and the guard; nothing of the engine, the rules, the guard, the
stores, the adapters or the service imports it.

:func:`main` runs one command and returns its exit status, as the ``loopwatch`` program does::

    from loopwatch.cli import main

    status = main(["scan", "runs/", "--json"])

The modules inside are the command line's own (private): one per command (``_scan_command``, ``_eval_command``,
``_explain_command``, ``_sessions_command``) and what they use: the scans, the evaluation against labels, the HTML
report (its style sheet, script and head are package data in ``assets/``), the summaries and the progress bar.
"""

from ._main import main

__all__ = ["main"]
