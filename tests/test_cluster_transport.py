"""`Transport.scatter(..., then=)`: each shard's result goes through `then` as it arrives, and
the results stay in shard order whatever order the shards finish in (no Ray needed: Ray's
`wait` is stood in for by one that hands back the last pending call first)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from recallql.cluster.runtime import ClusterError
from recallql.cluster.transport import InProcess, RayShards


class _Method:
    def __init__(self, value: object) -> None:
        self.value = value

    def options(self, **_: object) -> _Method:
        return self

    def remote(self, *args: object) -> tuple[object, tuple[object, ...]]:
        return (self.value, args)  # the "object ref": what the call returns, and its args


class _ReverseRay:
    """`wait` returns the last pending refs first (the shards finish in reverse order)."""

    class exceptions:  # noqa: N801 - mirrors `ray.exceptions`
        class RayError(Exception):
            pass

        class RayTaskError(RayError):
            cause: object = None

        class RayActorError(RayError):
            def __init__(self, actor_id: str | None = None, error_msg: str = "") -> None:
                super().__init__(error_msg)
                self.actor_id, self.error_msg = actor_id, error_msg

    def wait(self, pending: list, num_returns: int = 1) -> tuple[list, list]:
        ready = pending[::-1][:num_returns]
        return ready, [ref for ref in pending if ref not in ready]

    def get(self, ref: object) -> object:
        if isinstance(ref, list):
            return [self.get(r) for r in ref]
        value, _ = ref
        if isinstance(value, self.exceptions.RayError):
            raise value
        if isinstance(value, BaseException):
            err = self.exceptions.RayTaskError()
            err.cause = value  # Ray's task error carries the shard's exception
            raise err
        return value


def _shards(values: list[object]) -> tuple[RayShards, _ReverseRay]:
    ray = _ReverseRay()
    shards = RayShards(ray, Path("."), None, None, owner=False)  # type: ignore[arg-type]
    shards._actors = [SimpleNamespace(legs=_Method(v)) for v in values]
    return shards, ray


def test_ray_results_pass_through_then_as_they_arrive_and_stay_in_shard_order():
    shards, _ = _shards(["a", "b", "c", "d"])
    seen: list[tuple[int, object]] = []

    def then(i: int, result: object) -> str:
        seen.append((i, result))
        return f"{i}:{result}"

    assert shards.scatter("legs", [0, 1, 2, 3], [()] * 4, then=then) == \
        ["0:a", "1:b", "2:c", "3:d"]
    assert seen == [(3, "d"), (2, "c"), (1, "b"), (0, "a")]  # in arrival order


def test_ray_without_then_is_a_plain_list_in_shard_order():
    shards, _ = _shards(["a", "b", "c"])
    assert shards.scatter("legs", [2, 0], [(), ()]) == ["c", "a"]


def test_a_shard_error_reaches_the_caller_from_the_as_ready_path():
    shards, _ = _shards(["a", ClusterError("shard 1 is gone"), "c"])
    with pytest.raises(ClusterError, match="shard 1 is gone"):
        shards.scatter("legs", [0, 1, 2], [()] * 3, then=lambda i, r: r)


def test_a_dead_shard_is_a_cluster_error_naming_it_without_ray_s_traceback():
    ray = _ReverseRay()
    died = ray.exceptions.RayActorError(
        "ab12", "The actor died unexpectedly before finishing this task.\n"
        "\tclass_name: Shard\nTraceback (most recent call last): ...")
    shards, _ = _shards(["a", died, "c"])
    shards._actors[1]._actor_id = SimpleNamespace(hex=lambda: "ab12")
    for then in (None, lambda i, r: r):
        with pytest.raises(ClusterError) as caught:
            shards.scatter("legs", [0, 1, 2], [()] * 3, then=then)
        assert type(caught.value) is ClusterError
        assert str(caught.value) == (
            "shard 1 was lost during legs (RayActorError: The actor died unexpectedly before "
            "finishing this task.); Ray restarts a dead shard, which reopens its databases from "
            "disk: retry the call (a write is all or nothing on each shard, so a shard's part "
            "was written whole or not at all)")


def test_a_shard_s_own_error_crosses_as_itself_not_as_ray_s_wrapper():
    from recallql.grammar.errors import QuerySemanticError

    err = QuerySemanticError("unknown field 'x'", text="WHERE x = 1", span=(6, 7), hint="h")
    shards, _ = _shards(["a", err])
    with pytest.raises(QuerySemanticError) as caught:
        shards.scatter("legs", [0, 1], [(), ()])
    assert caught.value is err and (caught.value.line, caught.value.column) == (1, 7)


def test_in_process_then_sees_each_result_in_shard_order(tmp_path):
    transport = InProcess(tmp_path, None, None)
    for i in range(3):
        transport.add(i)
    seen = []
    out = transport.scatter("pid", [2, 0, 1], [(), (), ()],
                            then=lambda i, pid: seen.append(i) or (i, pid))
    assert seen == [0, 1, 2]
    assert [i for i, _ in out] == [0, 1, 2]
    transport.close()
