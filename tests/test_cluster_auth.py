"""Joining a Ray cluster with its token (`recallql.cluster.runtime.join_with_token_auth`):
Ray 2.60+ starts a local instance with token authentication on, but a process joining by
address stays in its environment's mode (off) and is refused, so a token at hand turns token
mode on unless ``RAY_AUTH_MODE`` says otherwise. (`test_cluster_ray.py`'s
``cluster serve`` test joins a real served cluster this way.)"""

from __future__ import annotations

import pytest

from recallql.cluster.runtime import join_with_token_auth


@pytest.fixture()
def env(monkeypatch, tmp_path):
    for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return monkeypatch, tmp_path


def test_no_token_leaves_the_mode_off(env):
    monkeypatch, _ = env
    assert join_with_token_auth() is False
    import os
    assert "RAY_AUTH_MODE" not in os.environ


@pytest.mark.parametrize("source", ["default-file", "token-path", "token-env"])
def test_a_token_at_hand_turns_token_mode_on(env, source):
    import os

    monkeypatch, home = env
    if source == "default-file":
        (home / ".ray").mkdir()
        (home / ".ray" / "auth_token").write_text("t" * 32)
    elif source == "token-path":
        (home / "tok").write_text("t" * 32)
        monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(home / "tok"))
    else:
        monkeypatch.setenv("RAY_AUTH_TOKEN", "t" * 32)
    assert join_with_token_auth() is True
    assert os.environ["RAY_AUTH_MODE"] == "token"


@pytest.mark.parametrize(("mode", "on"), [("disabled", False), ("token", True)])
def test_an_explicit_mode_is_respected(env, mode, on):
    import os

    monkeypatch, home = env
    (home / ".ray").mkdir()
    (home / ".ray" / "auth_token").write_text("t" * 32)
    monkeypatch.setenv("RAY_AUTH_MODE", mode)
    assert join_with_token_auth() is on
    assert os.environ["RAY_AUTH_MODE"] == mode
