"""BeeWeaveEmbeddings: BeeWeave's embedding models as LangChain ``Embeddings``.

Real parts only: the shipped offline MiniLM embeds every text (nothing is downloaded),
LangChain's own ``InMemoryVectorStore`` searches, a weave stores on a SQLite file with
embedded Chroma.  langchain-tests' ``EmbeddingsIntegrationTests`` runs on the adapter.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_tests.integration_tests import EmbeddingsIntegrationTests

import beeweave_langchain
from beeweave_core.embeddings import MiniLMEmbeddings, default_embeddings, embedding_identity
from beeweave_core.weave import Weave
from beeweave_langchain.embeddings import BeeWeaveEmbeddings
from beeweave_langchain.store import BeeWeaveStore

TEXTS = [
    "Staging backups are kept for nineteen days.",
    "The cat naps on the warm windowsill every afternoon.",
    "Please move the deploy window to 03:40 UTC on Thursdays.",
    "My sister is learning to play the cello.",
]


class TestBeeWeaveEmbeddingsStandard(EmbeddingsIntegrationTests):
    """LangChain's standard embeddings suite, sync and async, on the default model."""

    @property
    def embeddings_class(self) -> type[BeeWeaveEmbeddings]:
        return BeeWeaveEmbeddings

    @property
    def embedding_model_params(self) -> dict[str, Any]:
        return {}


def test_is_langchain_embeddings_over_the_default_model_and_exported():
    adapter = BeeWeaveEmbeddings()
    assert isinstance(adapter, Embeddings)
    assert adapter.embedder is default_embeddings()
    assert beeweave_langchain.BeeWeaveEmbeddings is BeeWeaveEmbeddings
    assert "BeeWeaveEmbeddings" in beeweave_langchain.__all__


def test_vectors_are_the_core_models_sync_and_async():
    adapter, core = BeeWeaveEmbeddings(), MiniLMEmbeddings()  # two instances of the model
    want_docs = np.asarray(core.embed_documents(TEXTS))
    want_query = np.asarray(core.embed_query("how long are backups kept?"))
    assert want_docs.shape == (len(TEXTS), 384)
    np.testing.assert_allclose(adapter.embed_documents(TEXTS), want_docs, atol=1e-6)
    np.testing.assert_allclose(
        adapter.embed_query("how long are backups kept?"), want_query, atol=1e-6
    )
    got_docs = asyncio.run(adapter.aembed_documents(TEXTS))
    got_query = asyncio.run(adapter.aembed_query("how long are backups kept?"))
    np.testing.assert_allclose(got_docs, want_docs, atol=1e-6)
    np.testing.assert_allclose(got_query, want_query, atol=1e-6)


def test_a_given_model_is_the_one_that_embeds():
    long = "the quarterly report lists every supplier of the northern warehouses in detail"
    short = BeeWeaveEmbeddings(MiniLMEmbeddings(max_length=8))  # 6 word pieces after [CLS]
    cut = np.asarray(MiniLMEmbeddings(max_length=8).embed_query(long))
    whole = np.asarray(default_embeddings().embed_query(long))
    np.testing.assert_allclose(short.embed_query(long), cut, atol=1e-6)
    assert float(cut @ whole) < 0.99  # truncation changed the vector: not the default model


def test_identity_and_model_attributes_are_the_models():
    model = MiniLMEmbeddings()
    adapter = BeeWeaveEmbeddings(model)
    assert embedding_identity(adapter) == embedding_identity(model)
    assert adapter.model_name == "all-MiniLM-L6-v2-int8" and adapter.offline is True
    assert adapter.embed_array(["x"]).shape == (1, 384)  # the model's own batched path
    assert not hasattr(adapter, "_session")  # private state stays the model's
    with pytest.raises(AttributeError, match="no_such_attribute"):
        adapter.no_such_attribute  # noqa: B018


def test_anything_but_an_embedder_is_a_type_error():
    with pytest.raises(TypeError, match="embed_documents and embed_query"):
        BeeWeaveEmbeddings("all-MiniLM-L6-v2")  # type: ignore[arg-type]


def test_langchains_in_memory_vector_store_finds_by_meaning():
    store = InMemoryVectorStore(BeeWeaveEmbeddings())
    ids = store.add_texts(TEXTS)
    for query, want in [
        ("How long do we retain the staging backups?", 0),
        ("Where does the kitten sleep?", 1),
        ("When is the release slot?", 2),
        ("Which instrument is my sibling studying?", 3),
    ]:
        (hit,) = store.similarity_search(query, k=1)
        assert hit.id == ids[want], (query, hit.page_content)
    (hit,) = asyncio.run(store.asimilarity_search("Where does the kitten sleep?", k=1))
    assert hit.page_content == TEXTS[1]


def test_a_weave_given_the_adapter_keeps_the_models_vectors(tmp_path: Path):
    """Same identity: reopening with the adapter neither re-embeds nor hides the vectors."""

    def open_weave(**kw: Any) -> Weave:
        return Weave.open(f"sqlite:///{tmp_path / 'w.db'}", spool_dir=tmp_path / "sp", **kw)

    weave = open_weave()
    for text in TEXTS:
        weave.emit("user_message", text, session_id="s")
    assert weave.flush(60, wait_index=True)
    assert weave.indexer is not None
    before = weave.indexer.identity
    weave.close()
    weave = open_weave(embeddings=BeeWeaveEmbeddings())
    try:
        assert weave.indexer is not None and weave.indexer.identity == before
        assert weave.indexer.sync(60)
        assert weave.indexer.index.count() == len(TEXTS)
        assert weave.indexer.index.other_identities() == {}
        hits = weave.retrieve("What is our snapshot retention?", session_id="s", k=1)
        assert hits[0].event.content == TEXTS[0]
    finally:
        weave.close()


def test_langgraphs_store_index_takes_a_beeweave_model(weave_factory):
    """``index={"embed": MiniLMEmbeddings()}``: LangGraph takes only ``Embeddings``, so
    BeeWeaveStore gives it the model through the adapter."""
    model = MiniLMEmbeddings()
    store = BeeWeaveStore(
        weave_factory(), index={"dims": model.dimension, "embed": model, "fields": ["text"]}
    )
    for n, text in enumerate(TEXTS):
        store.put(("notes",), f"n{n}", {"text": text})
    hits = store.search(("notes",), query="Which instrument is my sibling studying?", limit=1)
    assert [h.key for h in hits] == ["n3"] and hits[0].score is not None and hits[0].score > 0.3
