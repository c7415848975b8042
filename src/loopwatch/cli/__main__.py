"""``python -m loopwatch.cli ...``: the command line, as the ``loopwatch`` program runs it."""

import sys

from ._main import main

sys.exit(main())
