"""``python -m loopwatch ...``: the same as the ``loopwatch`` console script."""

import sys

from ._entry import main

sys.exit(main())
