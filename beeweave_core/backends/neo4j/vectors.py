"""Neo4j's own vector index, so a Neo4j deployment runs on one database.

Vectors live on ``(:BeeweaveChunk)`` nodes beside the event graph, linked to their
event by ``(:BeeweaveChunk)-[:CHUNK_OF]->(:Event)``.  Every chunk records its tenant,
event id, session, seq, time, type, user, agent and the embedding model name,
version and recipe.  Each embedding identity has its own vector property and index
(``v_<digest>`` / ``beeweave_vec_<digest>``: dimensions are fixed per index, and
two models' vectors must never meet), shared by all tenants of the database;
queries over-fetch and keep the tenant's nodes, widening until they have ``k``.

Scores are inner products, as in the Chroma index (``ip`` space): the context
recipe's vector is a sum of two unit vectors, and its dot product with a unit query
is the sum of the two cosines.  Neo4j has only cosine and Euclidean indexes, so a
vector ``v`` (``|v| <= NORM_BOUND``) is stored as the unit vector
``[v / B, sqrt(1 - |v|² / B²)]`` and the query as ``[q, 0]``: their cosine is
``q·v / B``, in the same order as ``q·v`` whatever each vector's length (normalising
``v`` instead would rank by ``q·v / |v|``, another order than SQLite + Chroma's).
Neo4j's cosine index scores ``(1 + cos) / 2``; results are turned back into ``q·v``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from beeweave_core.backends.neo4j import tx as neo4j_tx
from beeweave_core.index.base import (
    Chunk,
    EmbeddingIdentity,
    EmbeddingMismatch,
    IndexFilter,
    IndexState,
    check_vector,
    chunk_metadata,
)

if TYPE_CHECKING:
    from beeweave_core.backends.neo4j.events import Neo4jEventStore

LABEL = "BeeweaveChunk"
#: The longest vector stored: the context recipe's sum of two unit vectors.
NORM_BOUND = 2.0
#: How vectors are laid out in the index (recorded on the tenant's index state): a
#: tenant whose vectors were stored otherwise is emptied and re-embedded on open.
LAYOUT = "ip-lift/1"

SCHEMA: tuple[str, ...] = (
    f"CREATE CONSTRAINT beeweave_chunk_id IF NOT EXISTS "
    f"FOR (c:{LABEL}) REQUIRE (c.tenant, c.identity, c.id) IS UNIQUE",
    f"CREATE INDEX beeweave_chunk_event IF NOT EXISTS FOR (c:{LABEL}) ON (c.tenant, c.event_id)",
    "CREATE CONSTRAINT beeweave_index_state IF NOT EXISTS "
    "FOR (s:BeeweaveIndexState) REQUIRE (s.tenant, s.identity) IS UNIQUE",
)

#: Full float vectors, as Chroma keeps them: int8 quantization clips each vector's
#: largest components, and the lifted one (see the module doc) is always among them.
#: ``{index}``/``{prop}`` are filled only with ``beeweave_vip_<hex>`` / ``u_<hex>``.
CYPHER_CREATE_VECTOR_INDEX = (
    "CREATE VECTOR INDEX {index} IF NOT EXISTS FOR (c:" + LABEL + ") ON c.{prop} "
    "OPTIONS {{indexConfig: {{`vector.dimensions`: $dim, "
    "`vector.similarity_function`: 'cosine', `vector.quantization.enabled`: false}}}}"
)
CYPHER_AWAIT_INDEX = "CALL db.awaitIndex($name, $seconds)"
CYPHER_INDEX_DIMENSION = (
    "SHOW VECTOR INDEXES YIELD name, options WHERE name = $name "
    "RETURN options.indexConfig['vector.dimensions'] AS dim"
)
CYPHER_UPSERT = f"""
UNWIND $rows AS row
MERGE (c:{LABEL} {{tenant: $tenant, identity: $identity, id: row.id}})
SET c += row.props
WITH c, row
CALL db.create.setNodeVectorProperty(c, $prop, row.vector)
WITH c, row
OPTIONAL MATCH (e:Event {{tenant: $tenant, id: row.props.event_id}})
FOREACH (_ IN CASE WHEN e IS NULL THEN [] ELSE [1] END | MERGE (c)-[:CHUNK_OF]->(e))
"""
CYPHER_DELETE_EVENTS = f"""
MATCH (c:{LABEL} {{tenant: $tenant}}) WHERE c.event_id IN $event_ids AND c.identity = $identity
DETACH DELETE c RETURN count(*) AS n
"""
CYPHER_QUERY = """
CALL db.index.vector.queryNodes($index, $fetch, $vector) YIELD node, score
WITH collect({c: node, s: score}) AS hits
WITH size(hits) AS raw, [h IN hits WHERE h.c.tenant = $tenant AND h.c.identity = $identity
     AND ($session_ids IS NULL OR h.c.session_id IN $session_ids)
     AND ($user_id IS NULL OR h.c.user_id = $user_id)
     AND ($agent_id IS NULL OR h.c.agent_id = $agent_id)
     AND ($types IS NULL OR h.c.type IN $types)
     AND ($since IS NULL OR h.c.ts >= $since)
     AND ($until IS NULL OR h.c.ts <= $until)
     AND ($scopes IS NULL OR h.c.scope IS NULL OR h.c.scope IN $scopes)] AS kept
UNWIND (CASE WHEN kept = [] THEN [null] ELSE kept END) AS h
RETURN raw, h.c.event_id AS event_id, h.s AS score
"""
CYPHER_IDS = f"""
MATCH (c:{LABEL} {{tenant: $tenant}})
WHERE c.identity = $identity AND ($event_ids IS NULL OR c.event_id IN $event_ids)
RETURN DISTINCT c.event_id AS event_id
"""
CYPHER_COUNT = (
    f"MATCH (c:{LABEL} {{tenant: $tenant}}) WHERE c.identity = $identity RETURN count(c) AS n"
)
CYPHER_IDENTITIES = f"""
MATCH (c:{LABEL} {{tenant: $tenant}}) WHERE c.identity <> $identity
RETURN c.embedding_model AS model, c.embedding_version AS version,
       coalesce(c.index_recipe, '') AS recipe, count(*) AS n
"""
CYPHER_DROP_IDENTITY = f"""
MATCH (c:{LABEL} {{tenant: $tenant}}) WHERE c.identity = $identity
CALL (c) {{ DETACH DELETE c }} IN TRANSACTIONS OF 5000 ROWS
"""
CYPHER_DROP_STATE = (
    "MATCH (s:BeeweaveIndexState {tenant: $tenant, identity: $identity}) DETACH DELETE s"
)
CYPHER_LOAD_STATE = (
    "MATCH (s:BeeweaveIndexState {tenant: $tenant, identity: $identity}) RETURN s.state AS state"
)
CYPHER_SAVE_STATE = (
    "MERGE (s:BeeweaveIndexState {tenant: $tenant, identity: $identity}) "
    "SET s.state = $state, s.layout = $layout"
)
#: The layout of a tenant's stored vectors: no row, nothing stored yet.
CYPHER_LOAD_LAYOUT = (
    "MATCH (s:BeeweaveIndexState {tenant: $tenant, identity: $identity}) RETURN s.layout AS layout"
)
#: An index of the earlier layout (``beeweave_vec_<digest>``, normalised vectors).
CYPHER_INDEX_EXISTS = "SHOW VECTOR INDEXES YIELD name WHERE name = $name RETURN name"
CYPHER_PURGE_TENANT = (
    f"MATCH (c:{LABEL} {{tenant: $tenant}}) CALL (c) {{ DETACH DELETE c }} "
    "IN TRANSACTIONS OF 5000 ROWS",
    "MATCH (s:BeeweaveIndexState {tenant: $tenant}) DETACH DELETE s",
)

_HEX = re.compile(r"[0-9a-f]{12}")
#: ``{name}`` is filled only with ``beeweave_vec_<hex>``.
CYPHER_DROP_INDEX = "DROP INDEX {name} IF EXISTS"


def lift(mat: np.ndarray) -> np.ndarray:
    """Vectors (rows, ``|v| <= NORM_BOUND``) as unit vectors one dimension longer whose
    cosine with ``[q, 0]`` is ``q·v / NORM_BOUND`` (see the module doc)."""
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    scaled = mat / np.maximum(norms, NORM_BOUND)  # a longer one (not made here) is capped
    rest = np.sqrt(np.clip(1.0 - np.sum(scaled * scaled, axis=1, keepdims=True), 0.0, None))
    return np.hstack([scaled, rest])


class Neo4jVectorIndex(neo4j_tx.TenantNodes):
    """A tenant's vectors for one embedding identity, in Neo4j's own vector index."""

    #: Scores are inner products, as Chroma's (see the module doc): not one cosine.
    normalised_scores = False

    schema = SCHEMA
    purge = CYPHER_PURGE_TENANT

    def __init__(
        self,
        driver: Any,
        *,
        tenant: str,
        identity: EmbeddingIdentity,
        database: str | None = None,
        owns_driver: bool = False,
    ) -> None:
        self.identity = identity
        digest = identity.digest
        if not _HEX.fullmatch(digest):  # pragma: no cover - sha1 hex by construction
            raise ValueError(f"bad identity digest {digest!r}")
        self.index_name = f"beeweave_vip_{digest}"
        self.property = f"u_{digest}"
        self._old_index = f"beeweave_vec_{digest}"
        self._dimension: int | None = None
        super().__init__(driver, tenant=tenant, database=database, owns_driver=owns_driver)
        self._upgrade_layout()

    def _upgrade_layout(self) -> None:
        """Vectors an older BeeWeave stored (normalised, in ``beeweave_vec_*``) rank
        in another order: drop that index and this tenant's vectors, which the
        indexer then embeds anew (its gap check finds every event without one)."""
        if self._run(CYPHER_INDEX_EXISTS, read=True, name=self._old_index):
            stmt = CYPHER_DROP_INDEX.format(name=self._old_index)
            self.driver.execute_query(stmt, database_=self.database)
        rows = self._run(CYPHER_LOAD_LAYOUT, read=True, **self._p())
        if rows and rows[0]["layout"] != LAYOUT:
            self.reset()

    @classmethod
    def for_store(cls, store: Neo4jEventStore, *, identity: EmbeddingIdentity) -> Neo4jVectorIndex:
        """On the driver and database of a :class:`Neo4jEventStore` (not closed here)."""
        return cls(store.driver, tenant=store.tenant, identity=identity, database=store.database)

    def _p(self, **params: Any) -> dict[str, Any]:
        return {"identity": self.identity.key, **params}

    # ----------------------------------------------------------- dimension
    @property
    def dimension(self) -> int | None:
        """The model's dimension (the index holds one more: see the module doc)."""
        if self._dimension is None:
            rows = self._run(CYPHER_INDEX_DIMENSION, read=True, name=self.index_name)
            if rows and rows[0]["dim"] is not None:
                self._dimension = int(rows[0]["dim"]) - 1
        return self._dimension

    def _ensure_index(self, dim: int) -> None:
        have = self.dimension
        if have is not None:
            if have != dim:
                raise EmbeddingMismatch(
                    f"Neo4j vector index {self.index_name} holds {have}-dimensional vectors "
                    f"but {self.identity} gives {dim}: give the model a distinct version"
                )
            return
        stmt = CYPHER_CREATE_VECTOR_INDEX.format(index=self.index_name, prop=self.property)
        self.driver.execute_query(stmt, {"dim": int(dim) + 1}, database_=self.database)
        self.driver.execute_query(
            CYPHER_AWAIT_INDEX, {"name": self.index_name, "seconds": 300}, database_=self.database
        )
        self._dimension = dim

    # -------------------------------------------------------------- writes
    def upsert(self, chunks: Sequence[Chunk], vectors: Sequence[Sequence[float]]) -> int:
        if len(chunks) != len(vectors):
            raise ValueError(f"{len(chunks)} chunks but {len(vectors)} vectors")
        if not chunks:
            return 0
        mat = np.asarray(vectors, dtype=np.float64)
        if mat.ndim != 2:
            raise ValueError("vectors must all have the same dimension")
        self._ensure_index(mat.shape[1])
        mat = lift(mat)
        rows = [
            {
                "id": c.id,
                "vector": v.tolist(),
                "props": {**chunk_metadata(c, self.identity), "text": c.text},
            }
            for c, v in zip(chunks, mat, strict=True)
        ]
        for i in range(0, len(rows), 500):
            self._run(CYPHER_UPSERT, **self._p(rows=rows[i : i + 500], prop=self.property))
        return len(rows)

    def delete(self, event_ids: Sequence[str]) -> int:
        ids = list(dict.fromkeys(event_ids))
        if not ids:
            return 0
        rows = self._run(CYPHER_DELETE_EVENTS, **self._p(event_ids=ids))
        return int(rows[0]["n"]) if rows else 0

    # --------------------------------------------------------------- reads
    def query(
        self, vector: Sequence[float], *, k: int = 10, filters: IndexFilter | None = None
    ) -> list[tuple[str, float]]:
        if k <= 0 or self.dimension is None:
            return []
        check_vector(self.identity, self.dimension, vector)
        f = filters or IndexFilter()
        if (f.session_ids is not None and not list(f.session_ids)) or (
            f.types is not None and not list(f.types)
        ):
            return []
        params = self._p(
            index=self.index_name,
            vector=[*(float(x) for x in vector), 0.0],
            session_ids=list(f.session_ids) if f.session_ids is not None else None,
            user_id=f.user_id,
            agent_id=f.agent_id,
            types=[t.value if hasattr(t, "value") else str(t) for t in f.types]
            if f.types is not None
            else None,
            since=f.since,
            until=f.until,
            scopes=f.scope_values(),
        )
        fetch = max(4 * k + 20, 50)
        while True:
            rows = self._run(CYPHER_QUERY, read=True, fetch=fetch, **params)
            best: dict[str, float] = {}
            for r in rows:
                if r["event_id"] is None:
                    continue
                dot = (2.0 * float(r["score"]) - 1.0) * NORM_BOUND
                if dot > best.get(r["event_id"], -NORM_BOUND):
                    best[r["event_id"]] = dot
            raw = rows[0]["raw"] if rows else 0
            if len(best) >= k or raw < fetch or fetch >= 100_000:
                return sorted(best.items(), key=lambda p: -p[1])[:k]
            fetch *= 4

    def ids(self, event_ids: Sequence[str] | None = None) -> set[str]:
        wanted = list(dict.fromkeys(event_ids)) if event_ids is not None else None
        if wanted == []:
            return set()
        rows = self._run(CYPHER_IDS, read=True, **self._p(event_ids=wanted))
        return {r["event_id"] for r in rows}

    def count(self) -> int:
        rows = self._run(CYPHER_COUNT, read=True, **self._p())
        return int(rows[0]["n"]) if rows else 0

    # ---------------------------------------------------- identities, state
    def other_identities(self) -> dict[EmbeddingIdentity, int]:
        rows = self._run(CYPHER_IDENTITIES, read=True, **self._p())
        return {EmbeddingIdentity(r["model"], r["version"], r["recipe"]): int(r["n"]) for r in rows}

    def drop_identity(self, identity: EmbeddingIdentity) -> None:
        if identity == self.identity:
            raise ValueError("drop_identity() is for other identities; use reset() for this one")
        with neo4j_tx.session(self.driver, self.database) as s:
            s.run(CYPHER_DROP_IDENTITY, tenant=self.tenant, identity=identity.key).consume()
            s.run(CYPHER_DROP_STATE, tenant=self.tenant, identity=identity.key).consume()

    def load_state(self) -> IndexState:
        rows = self._run(CYPHER_LOAD_STATE, read=True, **self._p())
        return IndexState.from_json(json.loads(rows[0]["state"]) if rows else None)

    def save_state(self, state: IndexState) -> None:
        self._run(CYPHER_SAVE_STATE, **self._p(state=json.dumps(state.to_json()), layout=LAYOUT))

    def reset(self) -> None:
        with neo4j_tx.session(self.driver, self.database) as s:
            s.run(CYPHER_DROP_IDENTITY, tenant=self.tenant, identity=self.identity.key).consume()
            s.run(CYPHER_DROP_STATE, tenant=self.tenant, identity=self.identity.key).consume()

    def __repr__(self) -> str:
        return f"Neo4jVectorIndex(index={self.index_name!r}, tenant={self.tenant!r})"
