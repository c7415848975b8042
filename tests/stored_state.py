"""Reading what a store keeps of a session, for tests that look inside it."""

from __future__ import annotations

import binascii
import json
import marshal

from loopwatch._stored import PACKED_PREFIX
from loopwatch.core._session_state import _PACKED


def stored_index(text: str) -> int:
    """The number of events a stored session state has seen, whichever preset wrote it, packed or as JSON."""
    if text.startswith(PACKED_PREFIX):
        _swarm, (_layout, _rules, fields) = marshal.loads(binascii.a2b_base64(text[len(PACKED_PREFIX) :]))
        return int(dict(zip(_PACKED, fields, strict=True))["index"])
    return int(json.loads(text)["state"]["index"])
