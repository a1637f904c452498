"""The package's public names resolve (lazily) and the async twins are real coroutines."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import subprocess
import sys

import beeweave_langchain


def test_every_public_name_resolves():
    for name in beeweave_langchain.__all__:
        assert getattr(beeweave_langchain, name) is not None, name


def test_import_is_lazy():
    code = ("import sys, beeweave_langchain; "
            "print(any(m.startswith('beeweave_langchain.') for m in sys.modules))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_unknown_name_is_an_attribute_error():
    try:
        beeweave_langchain.NoSuchThing  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("expected AttributeError")


def test_async_handler_methods_are_coroutines():
    cls = importlib.import_module("beeweave_langchain.callbacks").AsyncBeeWeaveCallbackHandler
    for name in (
        "on_chat_model_start",
        "on_llm_end",
        "on_tool_start",
        "on_tool_end",
        "on_chain_error",
    ):
        assert inspect.iscoroutinefunction(getattr(cls, name)), name
    assert asyncio.iscoroutinefunction(cls.on_llm_new_token)
