"""What every adapter's tests check the same way: loopwatch without the framework installed."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def check_missing_framework(hidden: str, adapter: str, extra: str, *, also_import: str = "") -> None:
    """In a fresh interpreter where ``hidden`` cannot be imported: loopwatch imports and judges an event,
    and importing ``loopwatch.adapters.<adapter>`` raises ``MissingExtraError`` naming ``extra``."""
    code = textwrap.dedent(
        f"""
        import sys
        sys.modules[{hidden!r}] = None
        import loopwatch, loopwatch.adapters{", " + also_import if also_import else ""}
        from loopwatch import Guard, ToolCall
        assert Guard().observe("s", ToolCall("t")).action == "ok"
        try:
            import loopwatch.adapters.{adapter}
        except loopwatch.MissingExtraError as exc:
            assert isinstance(exc, ImportError) and exc.extra == {extra!r}, exc
            print(exc)
        else:
            raise SystemExit("imported without {hidden}")
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert f"pip install 'loopwatch[{extra}]'" in done.stdout
