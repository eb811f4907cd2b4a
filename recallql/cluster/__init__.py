"""recallql's cluster mode on Ray (the extra ``recallql[cluster]``; docs/cluster.md).

    >>> from recallql import cluster
    >>> c = cluster.connect(shards=4, path="mem-cluster/")     # under `unshare -n`, see below
    >>> c.create_collection("notes", fields={"agent_id": str}, embedder=None, dim=4)
    >>> c.ingest("notes", [{"id": "n1", "agent_id": "bob", "body": "backup", "vector": ...}])
    >>> c.execute("SEARCH notes MATCHING :q WHERE agent_id = 'bob' LIMIT 5", q="backup")

Shard actors each own many tenant databases and are their only writer; a stateless coordinator
routes a tenant's statements whole to its shard, and runs scatter-gather (globally exact BM25)
over collections shared by tenants. Ray's servers listen on every interface: start Ray only
inside a private network namespace (``unshare -n sh -c 'ip link set lo up && exec "$@"' sh
CMD``); `connect` refuses otherwise.
"""

from __future__ import annotations

from recallql.cluster.client import Cluster, connect
from recallql.cluster.placement import CollectionDef
from recallql.cluster.routed import ClusterWriteReport
from recallql.cluster.runtime import ClusterError

__all__ = ["Cluster", "ClusterError", "ClusterWriteReport", "CollectionDef", "connect"]
