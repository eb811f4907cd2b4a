"""The cluster on a local Ray instance with 4 shard actors: scatter-gather and tenant-routed
answers equal one database's on CACM, after writes, after a killed and restarted actor, and after
a shard is added.

Ray's servers listen on every interface, so these tests run only inside a private network
namespace with nothing but loopback: ``make test-cluster`` runs them under
``unshare -n sh -c 'ip link set lo up && exec "$@"' sh``. Elsewhere they skip, saying so.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from cluster_helpers import (
    CLOCK,
    EMBEDDER,
    FIELDS,
    Routed,
    cacm_docs,
    cacm_queries,
    cases,
    differences,
    setup_tenants,
    single_database,
    tenant_database,
    tenant_docs,
    where_routed,
)

from recallql import cluster
from recallql.cluster.runtime import network_interfaces

pytestmark = pytest.mark.cluster

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'recallql[cluster]'")
if network_interfaces():
    pytest.skip("`unshare -n` is not permitted here, and these tests start Ray, whose servers "
                "listen on every interface" if os.environ.get("RECALLQL_NO_UNSHARE") else
                "starts Ray, whose servers listen on every interface: runs only inside a "
                "private network namespace (`make test-cluster` uses unshare -n)",
                allow_module_level=True)


@pytest.fixture(scope="module")
def systems(index_shared_data, tmp_path_factory):
    docs = cacm_docs(index_shared_data)
    root = tmp_path_factory.mktemp("ray")
    c = cluster.connect(shards=4, path=root / "cluster", embedder=None, clock=CLOCK,
                        num_cpus=2)
    c.create_collection("cacm_all", text_fields=("title", "body"), fields=FIELDS,
                        embedder=EMBEDDER, shared=True)
    c.ingest("cacm_all", docs[:3000])
    setup_tenants(c, docs)
    single = Shared(single_database(root / "single", docs[:3000], "cacm_all"))
    parts = tenant_docs(docs)
    refs = {t: tenant_database(root / t, parts[t]) for t in ("agent-2", "agent-5")}
    yield c, single, refs, docs, cacm_queries(index_shared_data)
    c.close()
    single.close()
    for db in refs.values():
        db.close()


class Shared:
    """A cluster or database whose collection `cacm_all` the statements call `cacm` (the
    cluster's per-tenant collection is `cacm`)."""

    def __init__(self, target):
        self.target = target

    def execute(self, text, **params):
        return self.target.execute(text.replace("cacm ", "cacm_all "), **params)

    def ingest(self, collection, items):
        return self.target.ingest("cacm_all", items)

    def close(self):
        self.target.close()


def _some(queries, n=16):
    return dict(list(queries.items())[:n])


def test_scatter_gather_equals_one_database(systems):
    c, single, _, _, queries = systems
    assert differences(Shared(c), single, cases(queries)) == []


def test_tenant_routed_equals_the_tenants_database(systems):
    c, _, refs, _, queries = systems
    for tenant, db in refs.items():
        assert differences(Routed(c, tenant), db, cases(_some(queries, 8))) == []
        assert differences(c, db, where_routed(tenant, _some(queries))) == []


def test_after_writes(systems):
    c, single, refs, docs, queries = systems
    single.ingest("cacm", docs[3000:])
    c.ingest("cacm_all", docs[3000:])
    extra = [{"id": "w1", "title": "tape backup of symbol tables", "agent_id": "agent-2"}]
    refs["agent-2"].ingest("cacm", extra)
    c.ingest("cacm", extra)
    assert differences(Shared(c), single, cases(_some(queries))) == []
    assert differences(Routed(c, "agent-2"), refs["agent-2"], cases(_some(queries, 8))) == []


def test_a_stale_plan_is_refused_across_ray_and_made_again(systems):
    """The shards' refusal (`StalePlan`) crosses Ray as itself; the coordinator re-plans once
    with a fresh context, and the answers are one database's."""
    from recallql.cluster.planner import PlanContext

    c, single, _, _, queries = systems
    good = c.planner.context("cacm_all")
    c.planner._contexts["cacm_all"] = PlanContext.of(good.info, 1, good.signal_names,
                                                     good.can_embed)
    assert differences(Shared(c), single, cases(_some(queries, 2))) == []
    assert c.planner.context("cacm_all").key == good.key


def _restarted(c, index, before, timeout=120.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            pid = ray.get(c.actor(index).pid.remote())
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError):
            time.sleep(0.2)
            continue
        if pid != before:
            return pid
        time.sleep(0.2)
    raise AssertionError(f"shard {index} was not restarted within {timeout} s")


def test_a_killed_actor_restarts_and_reopens_its_databases(systems):
    c, single, refs, _, queries = systems
    owner = c.tenants()["agent-5"]
    before = ray.get(c.actor(owner).pid.remote())
    ray.kill(c.actor(owner), no_restart=False)
    assert _restarted(c, owner, before) != before
    assert differences(Shared(c), single, cases(_some(queries))) == []
    assert differences(Routed(c, "agent-5"), refs["agent-5"], cases(_some(queries, 8))) == []
    extra = [{"id": "k1", "title": "written after the restart", "agent_id": "agent-5"}]
    refs["agent-5"].ingest("cacm", extra)
    c.ingest("cacm", extra)
    assert differences(Routed(c, "agent-5"), refs["agent-5"], cases(_some(queries, 4))) == []


def test_an_added_shard_takes_new_tenants_and_changes_no_answer(systems):
    c, single, refs, _, queries = systems
    placed = c.tenants()
    assert c.add_shard() == 4
    c.ingest("cacm", [{"id": "n1", "title": "a new agent's note", "agent_id": "agent-new"}])
    assert c.tenants() == {**placed, "agent-new": 4}
    assert c.execute("SEARCH cacm MATCHING 'new note' LIMIT 3", tenant="agent-new").ids() \
        == ["n1"]
    assert differences(Shared(c), single, cases(_some(queries, 8))) == []
    assert differences(Routed(c, "agent-2"), refs["agent-2"], cases(_some(queries, 4))) == []


SERVE_CLIENT = """
import sys
from recallql import cluster
c = cluster.connect(address=sys.argv[1], path=sys.argv[2])
c.create_collection("notes", fields={"agent_id": str}, embedder=None, dim=4)
c.ingest("notes", [{"id": "a", "title": "tape backup", "agent_id": "bob",
                    "vector": [1, 0, 0, 0]}])
print(c.shards, c.execute("SEARCH notes MATCHING 'backup' WHERE agent_id = 'bob' LIMIT 3").ids())
c.close()
"""


def test_cluster_serve_and_a_client_that_joins_it(tmp_path):
    root = tmp_path / "served"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    server = subprocess.Popen(
        [sys.executable, "-m", "recallql.cli", "cluster", "serve", "--path", str(root),
         "--shards", "2", "--num-cpus", "1", "--embedder", "none"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        address = None
        for line in server.stdout:
            if line.startswith("address: "):
                address = line.split(": ", 1)[1].strip()
                break
        assert address is not None and address.startswith("127.0.0.1:")
        out = subprocess.run([sys.executable, "-c", SERVE_CLIENT, address, str(root)],
                             capture_output=True, text=True, timeout=300, env=env)
        assert out.returncode == 0, out.stderr[-3000:]
        assert out.stdout.strip().splitlines()[-1] == "2 ['a']"
    finally:
        server.terminate()
        server.wait(timeout=60)
