"""The Redis stores' server-side scripts (Lua, one round trip each): a session's compare-and-set and a swarm's count
of one call; their arguments and their replies."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Final

from . import MAX_SWARM_FINGERPRINTS, MAX_SWARM_WORKERS, NO_STATE, SwarmTally, Versioned, from_storable, storable
from ._redis_values import int_of


@dataclass(frozen=True)
class Script:
    text: str
    sha: str

    @classmethod
    def of(cls, text: str) -> Script:
        return cls(text, hashlib.sha1(text.encode()).hexdigest())


# KEYS[1]: the session's hash. ARGV: expected token ('': no state), state, ttl in ms (0: none), new token.
# Returns 0 when written, else {stored version ('0': none), stored state, stored token ('': none)}.
# A hash written before tokens existed has none: its token is 'v' and its version (what it was compared by).
CAS: Final = Script.of(
    """
local stored = redis.call('HMGET', KEYS[1], 'v', 's', 't')
local token = stored[3]
if not token then
  if stored[1] then token = 'v' .. stored[1] else token = '' end
end
if token ~= ARGV[1] then
  return {stored[1] or '0', stored[2] or '', token}
end
redis.call('HSET', KEYS[1], 'v', (tonumber(stored[1]) or 0) + 1, 's', ARGV[2], 't', ARGV[4])
local ttl = tonumber(ARGV[3])
if ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) else redis.call('PERSIST', KEYS[1]) end
return 0
"""
)

# KEYS: calls, tools, workers, order (see the module's docstring).
# ARGV: fingerprint, worker, tool, max fingerprints, max workers, ttl in ms (0: none).
# Returns {calls, workers} after counting the call.
SWARM_ADD: Final = Script.of(
    """
local fp, worker = ARGV[1], ARGV[2]
if redis.call('HEXISTS', KEYS[1], fp) == 0 then
  if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[4]) then
    while true do
      local oldest = redis.call('LPOP', KEYS[4])
      if not oldest then break end
      local gone = redis.call('HDEL', KEYS[1], oldest)
      redis.call('HDEL', KEYS[2], oldest)
      redis.call('HDEL', KEYS[3], oldest)
      if gone == 1 then break end
    end
  end
  redis.call('RPUSH', KEYS[4], fp)
  redis.call('HSET', KEYS[2], fp, ARGV[3])
end
local calls = redis.call('HINCRBY', KEYS[1], fp, 1)
local raw = redis.call('HGET', KEYS[3], fp)
local workers = {}
if raw then workers = cjson.decode(raw) end
local known = false
for i = 1, #workers do
  if workers[i] == worker then known = true break end
end
if not known and #workers < tonumber(ARGV[5]) then
  workers[#workers + 1] = worker
  redis.call('HSET', KEYS[3], fp, cjson.encode(workers))
end
local ttl = tonumber(ARGV[6])
for i = 1, 4 do
  if ttl > 0 then redis.call('PEXPIRE', KEYS[i], ttl) else redis.call('PERSIST', KEYS[i]) end
end
return {calls, #workers}
"""
)


def cas_result(reply: Any) -> Versioned | None:
    if not isinstance(reply, list):
        return None  # 0: written
    # The stored state that won; no token and no state when the session has none (deleted or expired since
    # the caller read it): the caller starts it afresh and writes it with ``expected=""``.
    if not reply[2]:
        return NO_STATE
    return Versioned(int_of(reply[0]), from_storable(reply[1] or ""), str(reply[2]))


def swarm_args(fingerprint: str, worker: str, tool: str, ttl_ms: str) -> tuple[str, ...]:
    """The swarm script's arguments; names as :func:`storable` text (a worker is kept in a JSON list)."""
    stored_worker = storable(worker)
    return (
        storable(fingerprint),
        stored_worker,
        storable(tool),
        str(MAX_SWARM_FINGERPRINTS),
        str(MAX_SWARM_WORKERS),
        ttl_ms,
    )


def swarm_result(reply: Any) -> SwarmTally:
    return SwarmTally(int(reply[0]), int(reply[1]))
