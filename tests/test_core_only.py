"""The core alone: a venv holding only BeeWeave's own dependencies (no extras).

There ``beeweave_core`` imports, writes, recalls and assembles on a SQLite file with no
LangChain or LlamaIndex anywhere, and the CLI answers a command that needs an extra
with the pip line that installs it.  Everything is real: ``python -m venv``, a wheel
built from this checkout, pip.  The dependencies' wheels are kept in a wheelhouse in
pip's cache directory (``BEEWEAVE_WHEELHOUSE`` overrides), so only the first run
downloads them from PyPI.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from beeweave_core.extras import importable

ROOT = Path(__file__).resolve().parent.parent
#: What a wheel build does not need from the checkout.
NOT_BUILT = ("tests", "notebooks", "scripts", "build", "dist", ".*", "*.egg-info", "__pycache__")
FRAMEWORKS = ("langchain_core", "langchain", "langgraph", "llama_index", "chromadb")
PIP_TIMEOUT = 900  # a first run downloads ~75 MB of wheels


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess[str]:
    # never from the checkout: ``python -c`` puts the working directory on sys.path, and the
    # checkout's packages (and an editable install's metadata) would shadow the venv's
    kw.setdefault("cwd", tempfile.gettempdir())
    return subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_TIMEOUT, **kw)


def _checked(cmd: list[str], **kw) -> subprocess.CompletedProcess[str]:
    done = _run(cmd, **kw)
    assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stdout}\n{done.stderr}"
    return done


def _wheelhouse() -> Path:
    if os.environ.get("BEEWEAVE_WHEELHOUSE"):
        return Path(os.environ["BEEWEAVE_WHEELHOUSE"])
    cache = _run([sys.executable, "-m", "pip", "cache", "dir"])
    base = Path(cache.stdout.strip()) if cache.returncode == 0 else Path(tempfile.gettempdir())
    return base / "beeweave-core-wheelhouse"


def _build_wheel(tmp: Path) -> Path:
    """A wheel of this checkout, built from a copy so the checkout gets no build/ dirs."""
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(*NOT_BUILT))
    isolation = ["--no-build-isolation"] if importable("setuptools") else []
    _checked([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", *isolation,
              "-w", str(tmp / "dist"), str(src)])  # fmt: skip
    (wheel,) = (tmp / "dist").glob("beeweave-*.whl")
    return wheel


def _pip_for(python: Path) -> list[str]:
    """pip for the venv of ``python``: this interpreter's (``--python``, pip >= 22.3; the venv
    then needs no pip of its own, which saves installing one), else the venv's own."""
    version = tuple(int(p) for p in importlib.metadata.version("pip").split(".")[:2])
    if version >= (22, 3):
        return [sys.executable, "-m", "pip", "--python", str(python)]
    _checked([str(python), "-m", "ensurepip", "-q"])
    return [str(python), "-m", "pip"]


def _install(python: Path, wheel: Path) -> None:
    """Install from the wheelhouse offline; fill it from PyPI first when it lacks a wheel."""
    pip, house = _pip_for(python), _wheelhouse()
    offline = [*pip, "install", "-q", "--no-compile", "--no-index", "--find-links", str(house),
               str(wheel)]  # fmt: skip
    if _run(offline).returncode == 0:
        return
    house.mkdir(parents=True, exist_ok=True)
    _checked([*pip, "wheel", "-q", "-w", str(house), str(wheel)])
    for own in house.glob("beeweave-*.whl"):  # this checkout's wheel is rebuilt every run
        own.unlink()
    _checked(offline)


@pytest.fixture(scope="module")
def core_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with ``pip install beeweave`` (no extras) from this checkout; its bin dir."""
    tmp = tmp_path_factory.mktemp("core-only")
    wheel = _build_wheel(tmp)
    _checked([sys.executable, "-m", "venv", "--without-pip", str(tmp / "venv")])
    bindir = tmp / "venv" / ("Scripts" if os.name == "nt" else "bin")
    _install(bindir / "python", wheel)
    return bindir


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The venv's environment: nothing from this checkout on the path, a private home."""
    out = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NEO4J_URI")}
    out["BEEWEAVE_HOME"] = str(tmp_path / "home")
    return out


SCRIPT = r"""
import importlib.metadata, importlib.util, json, logging, sys
logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
frameworks = {m: importlib.util.find_spec(m) is not None for m in sys.argv[3].split(",")}

from beeweave_core import Weave
from beeweave_core.extras import EXTRA_MODULES

weave = Weave.open(f"sqlite:///{sys.argv[1]}", spool_dir=sys.argv[2])
said = [
    "Our staging cluster keeps its nightly backups for 19 days.",
    "Noted: 19 days of nightly backups on staging.",
    "Please move the backup window to 03:40 UTC on Thursdays.",
    "Done, the backup window is now 03:40 UTC on Thursdays.",
]
for i, text in enumerate(said):
    weave.emit("user_message" if i % 2 == 0 else "assistant_message", text, session_id="ops")
flushed = weave.flush()
hits = weave.retrieve("when does the backup window start?", session_id="ops", k=3)
ctx = weave.assemble("ops", "how many days are backups kept?", budget_tokens=400)
weave.close()
meta = importlib.metadata.metadata("beeweave")
print(json.dumps({
    "frameworks": frameworks,
    "flushed": flushed,
    "hits": [h.event.content for h in hits],
    "context": ctx.text(),
    "loaded": sorted(m for m in sys.modules if m.split(".")[0] in ("langchain_core", "llama_index")),
    "extras_declared": sorted(meta.get_all("Provides-Extra") or []),
    "extras_known": sorted(EXTRA_MODULES),
    "requires": [r for r in meta.get_all("Requires-Dist") or [] if "extra ==" not in r],
}))
"""


def test_core_imports_writes_recalls_and_assembles_without_frameworks(core_venv, env, tmp_path):
    done = _checked([str(core_venv / "python"), "-c", SCRIPT, str(tmp_path / "memory.db"),
                     str(tmp_path / "spool"), ",".join(FRAMEWORKS)], env=env)  # fmt: skip
    out = json.loads(done.stdout)
    assert out["frameworks"] == dict.fromkeys(FRAMEWORKS, False)
    assert not out["loaded"], out["loaded"]
    assert not [r for r in out["requires"] if "langchain" in r]
    assert out["flushed"] is True
    # what was emitted comes back: recall finds the backup window, assembly keeps the 19 days
    assert out["hits"][0].endswith("03:40 UTC on Thursdays.")
    assert "19 days" in out["context"]
    # semantic recall is off, and the log line says why and what to install
    assert (
        'semantic recall is off (not installed: chromadb; pip install "beeweave[chroma]")'
        in done.stderr
    )
    # every extra the CLI can name exists in the distribution's metadata
    assert set(out["extras_known"]) <= set(out["extras_declared"])


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (["bench", "checkpoint", "--steps", "2"], 'pip install "beeweave[langgraph,bench]"'),
        (["bench", "capture", "--framework", "llamaindex"], 'pip install "beeweave[llamaindex]"'),
        (["bench", "context", "--scenarios", "."], 'pip install "beeweave[langchain,llamaindex]"'),
        (["ui"], 'pip install "beeweave[ui]"'),
        (["mcp"], 'pip install "beeweave[mcp]"'),
    ],
)
def test_cli_names_the_extra_a_command_needs(core_venv, env, args, hint):
    done = _run([str(core_venv / "beeweave"), *args], env=env)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].endswith(hint) and "Traceback" not in done.stderr


def test_cli_reads_a_store_without_frameworks(core_venv, env, tmp_path):
    db = tmp_path / "cli.db"
    _checked([str(core_venv / "python"), "-c", SCRIPT, str(db), str(tmp_path / "spool"),
              "langchain_core"], env=env)  # fmt: skip
    done = _checked([str(core_venv / "beeweave"), "sessions", "--url", f"sqlite:///{db}"], env=env)
    assert "ops" in done.stdout


def test_cli_lists_every_command_without_the_extras(core_venv, env):
    """The commands other packages bring are listed, by name: their modules import without
    their extras."""
    done = _checked([str(core_venv / "beeweave"), "--help"], env={**env, "COLUMNS": "160"})
    for command in ("demo", "sessions", "bench", "ui", "mcp", "tombstones", "retention"):
        assert f" {command} " in done.stdout, command
