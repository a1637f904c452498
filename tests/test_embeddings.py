"""Real-model tests of BeeWeave's default offline embedding model.

Everything here runs the shipped all-MiniLM-L6-v2 int8 ONNX file through
onnxruntime; nothing is mocked and nothing touches the network.
"""

from __future__ import annotations

import re
import threading

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings

from beeweave_core.e5_embeddings import MultilingualE5Embeddings
from beeweave_core.embedding_base import Embedder
from beeweave_core.embeddings import (
    DIMENSION,
    EmbeddingModelUnavailable,
    MiniLMEmbeddings,
    default_embeddings,
    embedding_identity,
    length_batches,
)


@pytest.fixture(scope="module")
def emb() -> MiniLMEmbeddings:
    return MiniLMEmbeddings()


def _cos(a, b) -> float:
    a, b = np.asarray(a), np.asarray(b)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.mark.parametrize("cls", [MiniLMEmbeddings, MultilingualE5Embeddings])
def test_the_models_implement_only_the_cores_embedder(cls):
    """LangChain's ``Embeddings`` view is beeweave_langchain's, whatever is installed."""
    assert isinstance(cls(), Embedder)
    assert not issubclass(cls, Embeddings)
    assert [c for c in cls.__mro__ if c.__module__.split(".")[0].startswith("langchain")] == []


def test_identity_names_the_model_its_weights_and_how_they_run(emb):
    assert emb.model_name == "all-MiniLM-L6-v2-int8"
    # package version + model sha256 prefix (+ the quantization recipe of the run copy)
    assert re.fullmatch(r"\d+(\.\d+)*\+8199be6f699a\.dyn8pc", emb.model_version)
    assert embedding_identity(emb) == (emb.model_name, emb.model_version)
    plain = MiniLMEmbeddings(quantize=False)
    assert re.fullmatch(r"\d+(\.\d+)*\+8199be6f699a", plain.model_version)


def test_dimension_and_unit_norm(emb):
    vecs = emb.embed_documents(["hello world", "The agent called the search tool."])
    assert len(vecs) == 2
    for v in vecs:
        assert len(v) == DIMENSION == 384
        assert all(isinstance(x, float) for x in v)
        assert np.all(np.isfinite(v))
        assert np.linalg.norm(v) == pytest.approx(1.0, abs=1e-5)
    q = emb.embed_query("hello world")
    assert len(q) == 384
    assert np.linalg.norm(q) == pytest.approx(1.0, abs=1e-5)


def test_paraphrase_closer_than_unrelated(emb):
    cases = [
        (
            "How do I reset my password?",
            "I forgot my password, how can I change it?",
            "The cat sleeps on the warm windowsill.",
        ),
        (
            "A man is playing a guitar.",
            "Someone is strumming a guitar.",
            "The stock market fell sharply today.",
        ),
        (
            "The weather in Paris is sunny today.",
            "It is bright and warm in Paris this afternoon.",
            "Quantum entanglement links particles across distance.",
        ),
        (
            "The deploy failed because the database migration timed out.",
            "Deployment broke: the DB migration hit a timeout.",
            "My grandmother bakes apple pie every Sunday.",
        ),
    ]
    for anchor, para, unrelated in cases:
        a, p, u = emb.embed_documents([anchor, para, unrelated])
        sp, su = _cos(a, p), _cos(a, u)
        assert sp > 0.6, (anchor, para, sp)
        assert su < 0.25, (anchor, unrelated, su)
        assert sp - su > 0.4


@pytest.mark.parametrize("quantize", [True, False])
def test_matches_reference_all_minilm_l6_v2(emb, quantize):
    # Cosine similarities of the fp32 sentence-transformers model on these
    # sentences (mean pooling + L2 normalisation), computed from the
    # published weights. The packaged file (int8 storage, float32 products) stays
    # within 0.015 of them; the integer-matmul copy quantizes each run's activations
    # too and stays within 0.03 (LoCoMo recall@10 moved by under 0.01 with it).
    emb = emb if quantize else MiniLMEmbeddings(quantize=False)
    tol = 0.03 if quantize else 0.015
    sents = ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]
    v = np.asarray(emb.embed_documents(sents))
    sim = v @ v.T
    assert sim[0, 1] == pytest.approx(0.6660, abs=tol)
    assert sim[0, 2] == pytest.approx(0.1046, abs=tol)
    assert sim[1, 2] == pytest.approx(0.1411, abs=tol)
    h = np.asarray(
        emb.embed_documents(
            [
                "That is a happy person",
                "That is a happy dog",
                "That is a very happy person",
                "Today is a sunny day",
            ]
        )
    )
    assert h[0] @ h[1] == pytest.approx(0.6946, abs=tol)
    assert h[0] @ h[2] == pytest.approx(0.9429, abs=tol)
    assert h[0] @ h[3] == pytest.approx(0.2569, abs=tol)


def test_batching_equals_single(emb):
    texts = [
        "short",
        "a somewhat longer sentence about tool calls and their results",
        "",
        "The assistant decided to book the 9:40 train to Lyon for 3 people.",
        "x",
        "Error 503 from the payments API; retry scheduled in 30 seconds.",
        "another medium length sentence here",
    ]
    small = MiniLMEmbeddings(batch_size=3)
    batched = np.asarray(small.embed_documents(texts))
    one_by_one = np.asarray([emb.embed_query(t) for t in texts])
    assert batched.shape == (len(texts), 384)
    np.testing.assert_allclose(batched, one_by_one, atol=2e-5)
    # order is preserved despite the length sort inside
    np.testing.assert_allclose(np.asarray(emb.embed_documents(texts)), one_by_one, atol=2e-5)


def test_length_batches_hold_each_text_once_shortest_first_within_both_limits():
    lengths = [40, 3, 250, 12, 12, 7, 90, 3, 60, 1]
    batches = length_batches(lengths, max_texts=3, max_tokens=120)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(len(lengths)))  # every text exactly once
    assert [lengths[i] for i in flat] == sorted(lengths)  # similar lengths side by side
    for b in batches:
        assert len(b) <= 3
        assert len(b) == 1 or len(b) * max(lengths[i] for i in b) <= 120
    assert [2] in batches  # a text over the token budget still gets a batch of its own
    assert length_batches([], 8, 512) == []
    assert length_batches([5] * 10, 4, 10_000) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_parallel_token_batches_equal_one_by_one_in_input_order(emb):
    filler = " ".join(f"clause{i} about the harbour ferry timetable" for i in range(60))
    texts = [
        "The kettle in the staff kitchen trips the breaker every morning.",
        "ok",
        filler,  # past 256 tokens: truncated, alone in its batch
        "Rotate the API key for the billing webhook before Friday's audit, please.",
        "",
        "ok",  # a duplicate keeps its own row
        "Wir treffen uns um acht am Bahnhof.",
        "snow",
        "Three of the nine greenhouse sensors report humidity above ninety percent.",
    ]
    one_by_one = np.asarray([emb.embed_query(t) for t in texts])
    serial = MiniLMEmbeddings(batch_size=3, batch_tokens=48, workers=1).embed_array(texts)
    parallel = MiniLMEmbeddings(batch_size=3, batch_tokens=48, workers=3).embed_array(texts)
    np.testing.assert_allclose(serial, one_by_one, atol=2e-5)
    np.testing.assert_allclose(parallel, serial, atol=1e-6)
    assert parallel.dtype == np.float32 and parallel.shape == (len(texts), DIMENSION)
    assert float(parallel[1] @ parallel[5]) == pytest.approx(1.0, abs=1e-6)


def test_empty_inputs(emb):
    assert emb.embed_documents([]) == []
    v = emb.embed_query("")
    assert len(v) == 384 and np.all(np.isfinite(v))
    assert np.linalg.norm(v) == pytest.approx(1.0, abs=1e-5)
    assert emb.embed_array([]).shape == (0, 384)


def test_long_text_truncated(emb):
    prefix = " ".join(f"word{i}" for i in range(400))  # far beyond 256 tokens
    a = emb.embed_query(prefix + " the ending is about cats")
    b = emb.embed_query(prefix + " a completely different ending about rockets")
    assert len(a) == 384 and np.all(np.isfinite(a))
    # everything after the 256th token is cut, so the endings cannot matter
    np.testing.assert_allclose(a, b, atol=1e-6)
    huge = emb.embed_query("lorem ipsum " * 20000)
    assert np.linalg.norm(huge) == pytest.approx(1.0, abs=1e-5)


def test_non_english_text(emb):
    texts = ["我喜欢在周末去公园散步。", "今天天气很好", "emoji 🚀🔥 and ünïcödé", "\u200b\n\t "]
    vecs = np.asarray(emb.embed_documents(texts))
    assert vecs.shape == (4, 384)
    assert np.all(np.isfinite(vecs))
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)


def test_lazy_and_thread_safe_loading():
    fresh = MiniLMEmbeddings()
    assert fresh._session is None  # construction loads nothing
    results: dict[int, list[float]] = {}
    errors: list[BaseException] = []
    sessions = []

    def work(i: int) -> None:
        try:
            results[i] = fresh.embed_query("concurrent first use")
            sessions.append(fresh._session)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len({id(s) for s in sessions}) == 1
    first = np.asarray(results[0])
    for v in results.values():
        np.testing.assert_allclose(v, first, atol=1e-6)


def test_default_embeddings_is_cached():
    a = default_embeddings()
    assert a is default_embeddings()
    assert isinstance(a, MiniLMEmbeddings)


def test_embedding_identity_for_other_embeddings():
    class Named(Embeddings):
        model = "text-embedding-3-small"

        def embed_documents(self, texts):
            raise NotImplementedError

        def embed_query(self, text):
            raise NotImplementedError

    class Versioned(Named):
        model_name = "my-model"
        model_version = "2024-05"

    class Bare(Embeddings):
        def embed_documents(self, texts):
            raise NotImplementedError

        def embed_query(self, text):
            raise NotImplementedError

    assert embedding_identity(Named()) == ("text-embedding-3-small", "unknown")
    assert embedding_identity(Versioned()) == ("my-model", "2024-05")
    name, version = embedding_identity(Bare())
    assert name.endswith("Bare") and version == "unknown"


def test_missing_override_path_is_an_error(monkeypatch, tmp_path):
    monkeypatch.setenv("BEEWEAVE_EMBEDDING_MODEL_PATH", str(tmp_path / "nope.onnx"))
    with pytest.raises(EmbeddingModelUnavailable):
        MiniLMEmbeddings().embed_query("x")


def test_env_override_directory(monkeypatch, tmp_path):
    # A directory holding the usual file names works as an override; the
    # explicit file's own sha256 becomes part of the version.
    from beeweave_core.embeddings import _default_model_path, _default_tokenizer_path

    (tmp_path / "model.onnx").symlink_to(_default_model_path())
    (tmp_path / "tokenizer.json").symlink_to(_default_tokenizer_path())
    monkeypatch.setenv("BEEWEAVE_EMBEDDING_MODEL_PATH", str(tmp_path))
    monkeypatch.setenv("BEEWEAVE_EMBEDDING_TOKENIZER_PATH", str(tmp_path))
    e = MiniLMEmbeddings()
    assert e.model_version.endswith("+8199be6f699a")
    assert len(e.embed_query("override works")) == 384
