"""The quantized copy of the packaged embedding model: derived once, checked, optional.

Real files and the real quantizer: each test derives into a cache folder of its own
(``BEEWEAVE_CACHE``), so the machine's shared copy is never touched.
"""

from __future__ import annotations

import logging

import numpy as np
import onnx
import pytest

from beeweave_core import quantize
from beeweave_core.embeddings import MiniLMEmbeddings

# held-out wording: sentences of no data set, short and long, two languages
SENTENCES = [
    "The nightly backup of the billing ledger now starts at 02:15 instead of midnight.",
    "Can you move my dentist appointment to Thursday afternoon?",
    "sounds good",
    "Our greenhouse sensors report humidity every ninety seconds.",
    "请把报销单在周五之前提交给财务部。",
]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BEEWEAVE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "models"


def test_the_copy_runs_integer_matmuls_and_keeps_the_vectors(cache, caplog):
    with caplog.at_level(logging.WARNING):
        fast = MiniLMEmbeddings()
        vectors = np.asarray(fast.embed_documents(SENTENCES))
    [copy] = cache.glob("*.onnx")
    ops = {n.op_type for n in onnx.load(str(copy)).graph.node}
    assert "MatMulInteger" in ops or "DynamicQuantizeMatMul" in ops
    assert fast.model_version.endswith(".dyn8pc")
    plain = np.asarray(MiniLMEmbeddings(quantize=False).embed_documents(SENTENCES))
    cosines = (vectors * plain).sum(axis=1)
    assert cosines.min() > 0.9, cosines  # "sounds good": the shortest text moves most
    assert np.median(cosines) > 0.98, cosines
    # the same neighbours: each sentence is still closest to itself
    assert (np.argmax(vectors @ plain.T, axis=1) == np.arange(len(SENTENCES))).all()
    assert not [r for r in caplog.records if "pre-processing" in r.getMessage()]


def test_a_second_process_reuses_the_copy_and_a_damaged_copy_is_derived_again(cache):
    MiniLMEmbeddings().embed_query("first use derives the copy")
    [copy] = cache.glob("*.onnx")
    stamp = copy.stat().st_mtime_ns
    MiniLMEmbeddings().embed_query("second use finds it")
    assert copy.stat().st_mtime_ns == stamp
    with open(copy, "r+b") as fh:  # one flipped byte in the weights
        fh.seek(copy.stat().st_size // 2)
        byte = fh.read(1)
        fh.seek(-1, 1)
        fh.write(bytes([byte[0] ^ 0xFF]))
    again = MiniLMEmbeddings()
    assert again.model_version.endswith(".dyn8pc")
    assert copy.stat().st_mtime_ns != stamp
    assert quantize.sha256_of(copy) == (cache / (copy.name + ".sha256")).read_text()


def test_when_the_copy_cannot_be_made_the_packaged_file_runs(tmp_path, monkeypatch, caplog):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder would go")
    monkeypatch.setenv("BEEWEAVE_CACHE", str(blocker))
    with caplog.at_level(logging.WARNING, logger="beeweave.embeddings"):
        emb = MiniLMEmbeddings()
        vec = emb.embed_query("the packaged model still answers")
    assert not emb.model_version.endswith(".dyn8pc")
    assert len(vec) == 384
    assert "not quantized" in caplog.text


def test_a_source_that_does_not_match_its_digest_is_not_quantized(cache, tmp_path):
    from beeweave_core.embeddings import MODEL_SHA256, _default_model_path

    forged = tmp_path / "model.onnx"
    data = bytearray(_default_model_path().read_bytes())
    data[len(data) // 2] ^= 0xFF
    forged.write_bytes(bytes(data))
    assert quantize.quantized(forged, MODEL_SHA256) is None
    assert not list(cache.glob("*.onnx"))
