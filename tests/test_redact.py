"""Redaction of secrets in audit records (loopwatch.redact)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopwatch.errors import ConfigError
from loopwatch.redact import CYCLE, REDACTED, REPR_LIMIT, TRUNCATED, Redactor, redact

# Fake credentials, built from pieces so that no scanner mistakes this file for a leak.
OPENAI = "sk-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0U1v2W3x4"
OPENAI_PROJECT = "sk-proj-" + "Zx9_Yw8-Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe"
ANTHROPIC = "sk-ant-" + "api03-" + "q" * 40 + "-" + "R2d2C3po" * 4
GITHUB_PAT = "ghp_" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6"
GITHUB_OAUTH = "gho_" + "Q" * 36
GITHUB_FINE = "github_pat_" + "11ABCDEFG0" + "_" + "x" * 60
SLACK = "xoxb-" + "123456789012-1234567890123-" + "AbCdEfGhIjKlMnOpQrStUvWx"
AWS = "AKIA" + "IOSFODNN7EXAMPLE"
GOOGLE = "AIza" + "SyA-1234567890abcdefghijklmnopqrstu"
JWT = (
    "eyJ"
    + "hbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    + ".eyJ"
    + "zdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIn0"
    + ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PEM = (
    "-----BEGIN "
    + "RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA1234567890abcdef\nZmFrZSBrZXk=\n-----END RSA PRIVATE KEY-----"
)


@pytest.mark.parametrize(
    ("secret", "kept_prefix"),
    [
        (OPENAI, "sk-"),
        (OPENAI_PROJECT, "sk-proj-"),
        (ANTHROPIC, "sk-ant-"),
        (GITHUB_PAT, "ghp_"),
        (GITHUB_OAUTH, "gho_"),
        (GITHUB_FINE, "github_pat_"),
        (SLACK, "xoxb-"),
        (AWS, "AKIA"),
        (GOOGLE, "AIza"),
    ],
)
def test_known_key_formats_are_masked_inside_text(secret: str, kept_prefix: str) -> None:
    text = f"run: echo {secret} done"
    result = redact(text)
    assert secret not in result
    assert secret[len(kept_prefix) : len(kept_prefix) + 12] not in result
    assert f"echo {kept_prefix}{REDACTED} done" in result


def test_jwt_is_replaced() -> None:
    result = redact(f"cookie-less call with {JWT} attached")
    assert result == f"cookie-less call with {REDACTED} attached"


def test_pem_private_key_block_is_replaced_and_surroundings_kept() -> None:
    result = redact(f"key file:\n{PEM}\nend of file")
    assert "MIIEowIBAAKCAQEA" not in result
    assert result.startswith("key file:\n[REDACTED PRIVATE KEY]")
    assert result.endswith("\nend of file")


def test_pem_block_without_end_marker_is_replaced_to_the_end() -> None:
    cut = PEM.split("-----END")[0]
    assert "MIIEowIBAAKCAQEA" not in redact("prefix " + cut)


def test_bearer_token_in_a_command_keeps_the_command_readable() -> None:
    command = "curl -H 'Authorization: Bearer abc.def' https://api.example.com/v1/items"
    assert redact(command) == f"curl -H 'Authorization: Bearer {REDACTED}' https://api.example.com/v1/items"


def test_standalone_bearer_token() -> None:
    assert redact("sent Bearer tok_123456 upstream") == f"sent Bearer {REDACTED} upstream"


def test_bearer_in_prose_is_left_alone() -> None:
    assert redact("the bearer of bad news") == "the bearer of bad news"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "https://example.com/cb?password=hunter2&page=2&access_token=abc123",
            f"https://example.com/cb?password={REDACTED}&page=2&access_token={REDACTED}",
        ),
        ("mysql --password=pw123 shop", f"mysql --password={REDACTED} shop"),
        ("export GITHUB_TOKEN=abc123; make", f"export GITHUB_TOKEN={REDACTED}; make"),
        ('{"password": "hunter 2", "user": "bob"}', f'{{"password": "{REDACTED}", "user": "bob"}}'),
        ("X-Api-Key: k-12345", f"X-Api-Key: {REDACTED}"),
        ("Cookie: a=1; sid=xyz", f"Cookie: {REDACTED}"),
        ("secret='top' rest", f"secret='{REDACTED}' rest"),
    ],
)
def test_secret_pairs_inside_strings(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize(
    "text",
    ["max_tokens=100 temperature=0.2", "tokenizer=gpt2", "author=Bob", "page=2&sort=asc", "input_tokens: 42"],
)
def test_harmless_pairs_are_kept(text: str) -> None:
    assert redact(text) == text


def test_url_userinfo_password_is_masked_and_user_kept() -> None:
    result = redact("git clone https://bob:s3cr3t@github.com/org/repo.git")
    assert result == f"git clone https://bob:{REDACTED}@github.com/org/repo.git"


def test_url_without_userinfo_is_untouched() -> None:
    text = "see https://example.com:8443/path?q=1#frag"
    assert redact(text) == text


def test_redaction_is_idempotent() -> None:
    text = f"curl -H 'Authorization: Bearer abc.def' 'https://u:p@h/?token=t' {GITHUB_PAT} Cookie: a=b"
    once = redact(text)
    assert redact(once) == once


@pytest.mark.parametrize(
    "key",
    [
        "api_key",
        "API-KEY",
        "apiKey",
        "x-api-key",
        "Authorization",
        "auth",
        "oauth_token",
        "password",
        "db_passwd",
        "client_secret",
        "aws_secret_access_key",
        "AccessKey",
        "private_key",
        "Cookie",
        "session_key",
        "credentials",
        "bearer",
        "token",
        "refresh_token",
    ],
)
def test_secret_looking_keys_are_redacted(key: str) -> None:
    assert redact({key: "some-value", "path": "x"}) == {key: REDACTED, "path": "x"}


@pytest.mark.parametrize(
    "key",
    [
        "author",
        "authored_by",
        "tokens",
        "input_tokens",
        "output_tokens",
        "max_tokens",
        "total_tokens",
        "tokenizer",
    ],
)
def test_harmless_keys_are_kept(key: str) -> None:
    assert redact({key: 1234}) == {key: 1234}
    assert redact({key: "plain"})[key] == ("plain" if key in ("author", "authored_by", "tokenizer") else REDACTED)


def test_token_counts_in_usage_blocks_are_untouched() -> None:
    usage = {
        "input_tokens": 1200,
        "output_tokens": 80,
        "max_tokens": 4096,
        "prompt_tokens_details": {"cached_tokens": 1024},
        "total_tokens": "1280",
    }
    assert redact({"usage": usage}) == {"usage": usage}


def test_redacted_values_of_any_type_and_none_kept() -> None:
    result = redact({"password": 1234, "token": ["a", "b"], "secret": {"x": 1}, "auth": None, "is_authenticated": True})
    assert result == {
        "password": REDACTED,
        "token": REDACTED,
        "secret": REDACTED,
        "auth": None,
        "is_authenticated": True,
    }


def test_extra_keys() -> None:
    record = {"x-tenant-id": "acme", "path": "x"}
    assert redact(record, extra_keys=["tenant"]) == {"x-tenant-id": REDACTED, "path": "x"}
    assert redact(record) == record


def test_nested_lists_and_dicts_are_walked_and_input_not_changed() -> None:
    record: dict[str, Any] = {
        "event": "loop.stop",
        "session": "s1",
        "evidence": {
            "tool": "bash",
            "args": {"api_key": "sk-abc", "path": "x", "env": [{"GITHUB_TOKEN": "t"}, f"echo {GITHUB_PAT}"]},
            "indices": (12, 14, 16),
        },
    }
    original = json.loads(json.dumps(record))
    result = redact(record)
    assert result["evidence"]["args"] == {
        "api_key": REDACTED,
        "path": "x",
        "env": [{"GITHUB_TOKEN": REDACTED}, f"echo ghp_{REDACTED}"],
    }
    assert result["evidence"]["indices"] == [12, 14, 16]
    assert result["session"] == "s1"
    assert json.loads(json.dumps(record)) == original  # a copy, not an in-place edit
    assert result["evidence"] is not record["evidence"]


def test_audit_record_fields_are_kept() -> None:
    record = {
        "event": "loop.nudge",
        "ts": 1732240000.0,
        "session": "s1",
        "worker": None,
        "swarm": None,
        "index": 16,
        "action": "nudge",
        "level": 1,
        "pattern": "repeat",
        "count": 3,
        "loop_start": 12,
        "status": None,
        "detector": "RepeatDetector(threshold=3)",
        "reason": "same call 3 times",
        "message": "try something else",
        "evidence": {"tool": "bash", "fingerprints": ["f1"], "indices": [12, 14, 16], "error": "exit 1"},
    }
    assert redact(record) == record


def test_cycles_are_cut() -> None:
    looping: dict[str, Any] = {"name": "a"}
    looping["self"] = looping
    items: list[Any] = [1]
    items.append(items)
    assert redact(looping) == {"name": "a", "self": CYCLE}
    assert redact(items) == [1, CYCLE]


def test_shared_references_that_are_not_cycles_are_copied_twice() -> None:
    shared = {"v": 1}
    assert redact({"a": shared, "b": shared}) == {"a": {"v": 1}, "b": {"v": 1}}


def test_depth_limit() -> None:
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(50):
        node["child"] = {}
        node = node["child"]
    result = redact(deep)
    depth = 0
    while isinstance(result, dict):
        result = result["child"]
        depth += 1
    assert depth == 20
    assert result == TRUNCATED
    assert Redactor(max_depth=2)({"a": {"b": {"c": 1}}}) == {"a": {"b": TRUNCATED}}


def test_huge_strings_are_clipped_with_a_marker() -> None:
    result = redact("x" * 25_000)
    assert result.startswith("x" * 10_000)
    assert result[10_000:] == "...[TRUNCATED 15000 chars]"
    assert redact("y" * 10_000) == "y" * 10_000


def test_secret_in_clipped_string_is_still_redacted() -> None:
    result = redact(f"{GITHUB_PAT} " + "z" * 20_000)
    assert GITHUB_PAT not in result


class _Opaque:
    def __repr__(self) -> str:
        return "Opaque(" + "o" * 1000 + ")"


class _BrokenRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no")


def test_non_json_values_become_clipped_reprs() -> None:
    result = redact({"obj": _Opaque(), "raw": b"bytes", "nan": float("nan"), "set": {3, 1, 2}, "broken": _BrokenRepr()})
    assert result["obj"].startswith("Opaque(ooo")
    assert len(result["obj"]) <= REPR_LIMIT
    assert result["raw"] == "b'bytes'"
    assert result["nan"] == "nan"
    assert sorted(result["set"]) == [1, 2, 3]
    assert "_BrokenRepr" in result["broken"]
    json.dumps(result, allow_nan=False)


def test_secrets_in_reprs_are_redacted() -> None:
    class Holder:
        def __repr__(self) -> str:
            return f"Holder(key={GITHUB_PAT})"

    assert GITHUB_PAT not in redact([Holder()])[0]


def test_non_string_keys() -> None:
    assert redact({1: "a", None: "b", (1, 2): "c"}) == {1: "a", None: "b", "(1, 2)": "c"}


def test_disabled_redactor_keeps_secrets_but_stays_bounded() -> None:
    looping: dict[str, Any] = {"api_key": OPENAI}
    looping["self"] = looping
    result = Redactor(enabled=False)(looping)
    assert result == {"api_key": OPENAI, "self": CYCLE}


def test_redactor_repr_and_validation() -> None:
    assert repr(Redactor(["tenant"])) == "Redactor(extra_keys=['tenant'], enabled=True, max_depth=20, max_string=10000)"
    with pytest.raises(ConfigError) as info:
        Redactor(max_depth=0)
    assert info.value.field == "max_depth"
    with pytest.raises(ConfigError) as info:
        Redactor("tenant")
    assert info.value.field == "extra_keys"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=30,
)


@given(json_values)
def test_output_is_always_strict_json(value: Any) -> None:
    json.dumps(redact(value), allow_nan=False)


@given(
    st.text(alphabet="abc XYZ-_=:/.,;'\"\n", max_size=40),
    st.text(alphabet="abc XYZ-_=:/.,;'\"\n", max_size=40),
)
def test_known_tokens_never_survive_between_separators(before: str, after: str) -> None:
    for secret in (GITHUB_PAT, AWS, SLACK, ANTHROPIC):
        result = redact(f"{before} {secret} {after}")
        assert secret not in result
