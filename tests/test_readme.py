"""Every shell command of the README and of ``docs/``, run in a fresh clone, so neither drifts.

The commands are read from the fenced ``bash`` blocks of ``README.md`` and then of every
``docs/*.md`` page (in name order) (one command a line, a
trailing ``# comment`` dropped) and run as a user would, from the root of a ``git clone``
of this repository, with the clone first on ``PYTHONPATH`` and a private ``BEEWEAVE_HOME``.
Three kinds of command are not run as written, each listed here and checked to still be in
the README (so the lists cannot go stale either):

- ``INSTEAD``: the install command.  Installing from the clone would re-point this
  environment's editable install at a temporary directory; the clone on ``PYTHONPATH``, and
  the console scripts its ``pyproject.toml`` declares written to a folder first on ``PATH``,
  are what it would achieve.
- ``SMALLER``: benchmarks, run with small sizes appended (the last value of an option wins).
- ``SKIPPED``: a network download, the suite itself, and a benchmark that starts its own
  Neo4j server and kills processes for minutes.

The LoCoMo file the README tells users to download is replaced, for this run, by a tiny file
of the same shape written here (own wording): the download is the skipped network command.

Every ``python`` block runs too, page by page, in order, each in a fresh namespace (a page
of ``docs/`` starts from the home the README's Quickstart block wrote).  A block may use the
names of :func:`given` (what the reader's own program holds: an open ``weave``, a ``model``,
``tools``, a store ``url`` …); the models there are FAKES, labelled as such, and nothing
else is.  A block that uses a name outside that list fails the test.

Every fence names its language: ``python`` and ``bash`` blocks run; ``text`` (output, a
command synopsis, a diagram, a server to start by hand), ``cypher`` and ``json`` are shown
only.  A bare fence fails the test, so a block is never left out by accident.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

INSTEAD = {'python3 -m pip install -e ".[all]"': "true"}
SMALLER = {
    "beeweave bench capture": "--n 2000",
    "beeweave bench ingest": "--events 1000 --single 100",
    "beeweave bench checkpoint": "--steps 4 --rounds 1 --reads 10",
    "beeweave bench assemble": "--sizes 60 --calls 2 --neo4j-size 60",
    "beeweave bench scale": "--max-events 10000 --queries 3",
    "beeweave bench acts": "--per-act 12",
}
SKIPPED = {
    "curl ": "downloads from the network",
    "scripts/test": "runs this very test suite (with its own Neo4j)",
    "beeweave bench durability": "starts its own Neo4j server and kills processes for minutes",
}
BUDGET_S = 240  # the whole README and docs, on a loaded 2-core machine
RUN = {"python", "bash"}
SHOWN = {"text", "cypher", "json"}


def doc_pages(root: Path = ROOT) -> list[Path]:
    """The README first, then every page of ``docs/`` by name: the order the test runs them."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def fence_languages(text: str) -> list[str]:
    """The language of every opening fence, in order ('' for a bare one)."""
    languages: list[str] = []
    inside = False
    for line in text.splitlines():
        if line.startswith("```"):
            if not inside:
                languages.append(line[3:].strip())
            inside = not inside
    return languages


def all_commands(root: Path = ROOT) -> list[str]:
    return [c for page in doc_pages(root) for c in readme_commands(page.read_text("utf-8"))]


def readme_commands(text: str) -> list[str]:
    """The commands of every fenced bash block, in order."""
    out: list[str] = []
    for block in re.findall(r"^```bash\n(.*?)^```", text, flags=re.S | re.M):
        for line in block.splitlines():
            line = re.sub(r"\s+#\s.*$", "", line).strip()
            if line and not line.startswith("#"):
                out.append(line)
    return out


def prepared(command: str) -> str | None:
    """The command as this test runs it (None: skipped)."""
    if any(command.startswith(p) for p in SKIPPED):
        return None
    for old, new in INSTEAD.items():
        command = command.replace(old, new)
    for prefix, extra in SMALLER.items():
        if command.startswith(prefix):
            command = f"{command} {extra}"
    return command


def tiny_locomo(path: Path) -> None:
    """Two conversations in the public ``locomo10.json`` shape (a list), own wording."""
    convs = []
    for n, (a, b, fact, q) in enumerate(
        [
            ("Rhea", "Olu", "I finally fixed the blue bicycle's gears.", "What did Rhea fix?"),
            ("Mina", "Joss", "We adopted a grey rabbit called Pebble.", "What pet did Mina get?"),
        ]
    ):
        turns = [
            {"speaker": a, "dia_id": "D1:1", "text": fact},
            {"speaker": b, "dia_id": "D1:2", "text": "That sounds like a good weekend."},
            {"speaker": a, "dia_id": "D1:3", "text": "The weather was mild, we walked a lot."},
        ]
        convs.append(
            {
                "sample_id": f"tiny-{n}",
                "conversation": {
                    "speaker_a": a,
                    "speaker_b": b,
                    "session_1_date_time": "1:56 pm on 8 May, 2023",
                    "session_1": turns,
                },
                "qa": [{"question": q, "answer": fact, "category": 4, "evidence": ["D1:1"]}],
            }
        )
    path.write_text(json.dumps(convs), encoding="utf-8")


def test_every_fence_says_whether_it_runs() -> None:
    for page in doc_pages():
        languages = fence_languages(page.read_text(encoding="utf-8"))
        unknown = [lang for lang in languages if lang not in RUN | SHOWN]
        assert not unknown, f"{page.name}: fences {unknown} neither run nor are marked shown"


def test_fence_languages_sees_a_bare_fence() -> None:
    assert fence_languages("```python\nx = 1\n```\n\n```\nout\n```\n") == ["python", ""]


def test_the_docs_are_split_by_topic() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 400
    pages = doc_pages()[1:]
    assert len(pages) >= 6
    for page in pages:  # every page is reachable from the README
        assert f"docs/{page.name}" in readme, f"the README does not link {page.name}"
    assert (ROOT / "CHANGELOG.md").is_file()


def test_the_lists_match_the_readme() -> None:
    commands = all_commands()
    assert len(commands) >= 10
    for listed in (*INSTEAD, *SMALLER, *SKIPPED):
        assert any(listed in c for c in commands), f"{listed!r} is no longer in README or docs"
    skipped = [c for c in commands if prepared(c) is None]
    assert len(skipped) == len(SKIPPED) <= 3, skipped
    assert not any("../shared" in c or "/work/" in c for c in commands)


def console_scripts(clone: Path, folder: Path) -> Path:
    """The console scripts ``pip install`` would write for the clone's ``[project.scripts]``,
    run by this interpreter (so the command is the clone's, whatever this environment has)."""
    declared = (clone / "pyproject.toml").read_text(encoding="utf-8")
    section = declared.split("[project.scripts]", 1)[1].split("\n[", 1)[0]
    folder.mkdir(parents=True)
    for name, module, func in re.findall(r'^([\w-]+)\s*=\s*"([\w.]+):(\w+)"', section, re.M):
        script = folder / name
        script.write_text(
            f"#!{sys.executable}\nimport sys\nfrom {module} import {func}\nsys.exit({func}())\n",
            encoding="utf-8",
        )
        script.chmod(0o755)
    return folder


def test_console_scripts_follow_the_pyproject(tmp_path: Path) -> None:
    folder = console_scripts(ROOT, tmp_path / "bin")
    assert "from beeweave_cli import main" in (folder / "beeweave").read_text(encoding="utf-8")
    done = subprocess.run(
        [str(folder / "beeweave"), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "160"},
    )
    assert done.returncode == 0 and "sessions" in done.stdout, done.stderr


@pytest.mark.neo4j
def test_every_readme_command_runs_in_a_fresh_clone(tmp_path: Path, neo4j_uri: str) -> None:
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=60)
    for page in doc_pages(clone):
        text = page.read_text(encoding="utf-8")
        assert "../shared" not in text and "/work/shared" not in text, page.name
    tiny_locomo(clone / "locomo10.json")
    env = {
        **os.environ,
        "PYTHONPATH": str(clone),
        "BEEWEAVE_HOME": str(tmp_path / "home"),
        "NEO4J_URI": neo4j_uri,
        "COLUMNS": "160",
    }
    bindir = Path(sys.executable).parent
    scripts = console_scripts(clone, tmp_path / "scripts")
    env["PATH"] = os.pathsep.join((str(scripts), str(bindir), env.get("PATH", "")))
    started = time.monotonic()
    for command in all_commands(clone):
        run = prepared(command)
        if run is None:
            continue
        done = subprocess.run(
            ["bash", "-c", run], cwd=clone, env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, (
            f"{command!r} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        )
    assert time.monotonic() - started < BUDGET_S


def test_prepared_keeps_commands_it_does_not_know() -> None:
    assert prepared("beeweave sessions") == "beeweave sessions"
    assert prepared("curl -o x https://example.org/x") is None
    assert shlex.split(prepared("beeweave bench capture") or "")[-2:] == ["--n", "2000"]


# ------------------------------------------------------------ the Python blocks
def readme_python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def given(tmp_path: Path, llamaindex: bool) -> dict[str, object]:
    """What a block takes from the reader's program.  FAKE models only (project rule)."""
    import itertools

    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool

    from beeweave_core import Weave
    from beeweave_langchain.testing import FakeToolCallingChatModel

    @tool
    def search_hotels(city: str) -> str:
        """Hotels in a city."""
        return f"Hotel Iris, {city}"

    fake_chat = FakeToolCallingChatModel(messages=itertools.repeat(AIMessage("noted")))  # FAKE
    names: dict[str, object] = {
        "weave": Weave.open(),  # the home the Quickstart block wrote into
        "model": fake_chat, "chat_model": fake_chat,
        "tools": [search_hotels], "my_tools": [search_hotels], "search_hotels": search_hotels,
        "url": f"sqlite:///{tmp_path / 'scoped.db'}",
    }  # fmt: skip
    if llamaindex:
        from llama_index.core.tools import FunctionTool

        from tests.llamaindex_fakes import ScriptedModel, convert_currency, fake_llm

        names["llm"] = fake_llm(ScriptedModel(tasks=[]))  # FAKE LLM: answers every message
        names["tools"] = [FunctionTool.from_defaults(convert_currency)]
    return names


def run_block(code: str, names: dict[str, object]) -> None:
    import ast
    import asyncio
    import inspect

    compiled = compile(code, "<README block>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    if compiled.co_flags & inspect.CO_COROUTINE:
        asyncio.run(eval(compiled, names))  # a block with a top-level ``await``
    else:
        exec(compiled, names)


PAGES_WITH_PYTHON = [p for p in doc_pages() if readme_python_blocks(p.read_text("utf-8"))]


def test_the_pages_hold_python_blocks() -> None:
    total = sum(len(readme_python_blocks(p.read_text("utf-8"))) for p in doc_pages())
    assert total >= 15  # the README alone held 11 before the docs split
    assert readme_python_blocks(doc_pages()[0].read_text("utf-8"))[0].startswith(
        "from beeweave_core import Weave\n"
    )  # the Quickstart comes first: it opens the home the other blocks read


@pytest.mark.parametrize("page", PAGES_WITH_PYTHON, ids=lambda p: p.name)
def test_every_python_block_runs(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from beeweave_core import Weave

    monkeypatch.setenv("BEEWEAVE_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    quickstart = readme_python_blocks((ROOT / "README.md").read_text(encoding="utf-8"))[0]
    blocks = readme_python_blocks(page.read_text(encoding="utf-8"))
    if page.name != "README.md":
        blocks = [quickstart, *blocks]
    ran = 0
    for n, code in enumerate(blocks):
        names = {} if n == 0 else given(tmp_path, "beeweave_llamaindex" in code)
        try:
            run_block(code, names)
        except Exception as exc:
            raise AssertionError(
                f"{page.name} python block {n + 1} failed:\n{code}\n{exc!r}"
            ) from exc
        finally:
            for value in names.values():
                if isinstance(value, Weave):
                    value.close()
        ran += 1
    assert ran == len(blocks)
