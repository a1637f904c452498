"""The memory-tool command set on BeeWeave: every command, every refusal (traversal
included), the version chain behind each file, and files found by recall.  Real SQLite
store; the vector index is off (the lexical path finds files by their words)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from beeweave_core import Weave
from beeweave_core.events import EdgeType, EventType, Status
from beeweave_core.memory_files import MemoryFiles, check_path
from beeweave_core.memory_ops import MemoryOps

NOTES = "# Release checklist\n- tag the build\n- bump the changelog\n- announce in #ops"


@pytest.fixture
def weave(tmp_path: Path) -> Any:
    w = Weave.open(f"sqlite:///{tmp_path / 'w.db'}", spool_dir=tmp_path / "sp", index=False)
    yield w
    w.close()


@pytest.fixture
def mem(weave: Any) -> MemoryFiles:
    return MemoryFiles(MemoryOps(weave, user_id="dev", agent_id="claude"))


def run(mem: MemoryFiles, command: str, **kw: Any) -> str:
    return mem.execute({"command": command, **kw})


def test_every_command(mem: MemoryFiles, weave: Any) -> None:
    root = run(mem, "view", path="/memories")
    assert root.startswith("Here're the files and directories up to 2 levels deep in /memories")
    assert run(mem, "create", path="/memories/proj/release.md", file_text=NOTES) == (
        "File created successfully at: /memories/proj/release.md")  # fmt: skip
    assert run(mem, "create", path="/memories/proj/release.md", file_text="x") == (
        "Error: File /memories/proj/release.md already exists")  # fmt: skip
    run(mem, "create", path="/memories/proj/deep/er/note.txt", file_text="hidden depth")
    listing = run(mem, "view", path="/memories").split("\n")[1:]
    paths = [row.split("\t")[1] for row in listing]
    assert paths == [
        "/memories",
        "/memories/proj",
        "/memories/proj/deep",
        "/memories/proj/release.md",
    ]  # fmt: skip  (two levels deep only)
    assert listing[3].split("\t")[0] == str(len(NOTES.encode()))
    view = run(mem, "view", path="/memories/proj/release.md")
    assert (
        view.split("\n")[0] == "Here's the content of /memories/proj/release.md with line numbers:"
    )
    assert view.split("\n")[2] == "     2\t- tag the build"
    ranged = run(mem, "view", path="/memories/proj/release.md", view_range=[3, -1])
    assert ranged.split("\n")[1:] == ["     3\t- bump the changelog", "     4\t- announce in #ops"]
    assert run(mem, "view", path="/memories/proj/release.md", view_range=[9, 10]).startswith(
        "Error: Invalid `view_range` parameter")  # fmt: skip

    edited = run(mem, "str_replace", path="/memories/proj/release.md",
                 old_str="- bump the changelog", new_str="- bump the changelog and version")  # fmt: skip
    assert edited.startswith("The memory file has been edited.\n")
    assert "     3\t- bump the changelog and version" in edited
    assert run(mem, "str_replace", path="/memories/proj/release.md", old_str="no such text",
               new_str="y") == ("No replacement was performed, old_str `no such text` did not "
                                "appear verbatim in /memories/proj/release.md.")  # fmt: skip
    assert run(mem, "str_replace", path="/memories/proj/release.md", old_str="- ",
               new_str="* ").startswith("No replacement was performed. Multiple occurrences "
                                        "of old_str `- ` in lines: [2, 3, 4]")  # fmt: skip
    assert run(mem, "insert", path="/memories/proj/release.md", insert_line=0,
               insert_text="<!-- owner: ops -->") == "The file /memories/proj/release.md has been edited."  # fmt: skip
    assert run(mem, "insert", path="/memories/proj/release.md", insert_line=6,
               insert_text="x") == ("Error: Invalid `insert_line` parameter: 6. It should be "
                                    "within the range of lines of the file: [0, 5]")  # fmt: skip
    lines = run(mem, "view", path="/memories/proj/release.md").split("\n")[1:]
    assert [ln.split("\t", 1)[1] for ln in lines] == [
        "<!-- owner: ops -->", "# Release checklist", "- tag the build",
        "- bump the changelog and version", "- announce in #ops"]  # fmt: skip

    assert run(mem, "rename", old_path="/memories/proj", new_path="/memories/archive") == (
        "Successfully renamed /memories/proj to /memories/archive")  # fmt: skip
    assert run(mem, "view", path="/memories/proj/release.md").startswith("The path /memories/proj")
    assert "- tag the build" in run(mem, "view", path="/memories/archive/release.md")
    run(mem, "create", path="/memories/b.md", file_text="b")
    assert run(mem, "rename", old_path="/memories/b.md", new_path="/memories/archive") == (
        "Error: The destination /memories/archive already exists")  # fmt: skip
    assert run(mem, "rename", old_path="/memories/nope", new_path="/memories/c") == (
        "Error: The path /memories/nope does not exist")  # fmt: skip
    assert run(mem, "delete", path="/memories/archive") == "Successfully deleted /memories/archive"
    assert (
        run(mem, "delete", path="/memories/archive")
        == "Error: The path /memories/archive does not exist"
    )
    assert run(mem, "view", path="/memories").split("\n")[1:] == [
        "1\t/memories",
        "1\t/memories/b.md",
    ]


def test_each_edit_is_a_version_in_the_audit_trail(mem: MemoryFiles, weave: Any) -> None:
    run(mem, "create", path="/memories/a.md", file_text="alpha")
    run(mem, "str_replace", path="/memories/a.md", old_str="alpha", new_str="beta")
    run(mem, "rename", old_path="/memories/a.md", new_path="/memories/b.md")
    run(mem, "delete", path="/memories/b.md")
    chain = weave.store.timeline(mem.ns, types=(EventType.MEMORY,), include_inactive=True)
    assert [(m.payload["path"], m.content, m.payload["version"]) for m in chain] == [
        ("/memories/a.md", "alpha", 1), ("/memories/a.md", "beta", 2), ("/memories/b.md", "beta", 3)]  # fmt: skip
    assert all(m.status == Status.INVALIDATED for m in chain)
    assert [m.status_reason.split(" by ")[0] for m in chain] == [
        "edited (/memories/a.md)", "renamed to /memories/b.md", "deleted via the memory tool: /memories/b.md"]  # fmt: skip
    for newer, older in zip(chain[1:], chain[:-1], strict=True):
        sup = weave.store.edges(event_id=newer.id, types=[EdgeType.SUPERSEDES])
        assert [e.dst for e in sup] == [older.id]
    assert {m.agent_id for m in chain} == {"claude"}


def test_files_are_searchable_with_recall(mem: MemoryFiles) -> None:
    run(
        mem, "create", path="/memories/oncall.md", file_text="Pager rotation: Ines covers weekends."
    )
    run(mem, "create", path="/memories/style.md", file_text="Use British spelling in docs.")
    out = mem.ops.recall("who covers the pager on weekends", k=1).text
    assert "/memories/oncall.md: Pager rotation" in out and "British" not in out


@pytest.mark.parametrize("path", [
    "/memories/../etc/passwd", "/memories/a/../../x", "/memories/./a", "/memories//a",
    "/memories/%2e%2e/secret", "/memories/%2E%2E%2Fx", "/memories/..%2fx", "/memories\\..\\x",
    "/memories/a\\b", "/memories/a\x00b", "/memories/a\nb", "/etc/passwd", "/", "memories/a",
    "../memories/a", "/memoriesx/a", "//memories/a", "/Memories/a", "file:///memories/a",
    "/memories/\uff0e\uff0e/x", "/memories/a\u202eb", "", "/memories/" + "a" * 600,
])  # fmt: skip
def test_unsafe_paths_are_refused(mem: MemoryFiles, weave: Any, path: str) -> None:
    for cmd in ({"command": "view", "path": path},
                {"command": "create", "path": path, "file_text": "x"},
                {"command": "str_replace", "path": path, "old_str": "a", "new_str": "b"},
                {"command": "insert", "path": path, "insert_line": 0, "insert_text": "x"},
                {"command": "delete", "path": path},
                {"command": "rename", "old_path": path, "new_path": "/memories/z"},
                {"command": "rename", "old_path": "/memories/z", "new_path": path}):  # fmt: skip
        out = mem.execute(cmd)
        assert out.startswith("Error:") and "\n" not in out, (cmd, out)
    assert weave.store.sessions() == []  # nothing was written


def test_bad_commands_are_one_line_errors(mem: MemoryFiles) -> None:
    assert run(mem, "format", path="/memories").startswith("Error: unknown command 'format'")
    assert mem.execute({"path": "/memories"}).startswith("Error: invalid memory command")
    assert mem.execute({"command": "view", "path": 7}).startswith("Error: invalid memory command")
    assert run(mem, "create", path="/memories").startswith("Error: /memories is the directory")
    assert run(mem, "create", path="/memories/x.md") == "Error: file_text is required"
    assert run(mem, "delete", path="/memories").startswith("Error: cannot delete the /memories")
    run(mem, "create", path="/memories/d/x.md", file_text="x")
    assert (
        run(mem, "create", path="/memories/d", file_text="x") == "Error: /memories/d is a directory"
    )
    assert run(mem, "rename", old_path="/memories/d", new_path="/memories/d/e").startswith(
        "Error: cannot move /memories/d inside itself")  # fmt: skip
    assert check_path("/memories/notes/") == "/memories/notes"


@pytest.mark.parametrize("backend", ["sqlite", "neo4j"])
def test_ops_and_files_on_both_backends(backend: str, weave_factory: Any) -> None:
    """The same operations on the embedded store and on the real Neo4j server (lexical
    recall: full-text search of each backend; no vector index)."""
    w = weave_factory(backend, index=False)
    ops = MemoryOps(w, user_id="dev", agent_id="ci")
    first = ops.remember("The nightly build publishes to the artifacts-eu bucket.")
    new = ops.update(first.ids[0], "The nightly build publishes to the artifacts-us bucket.")
    assert "artifacts-us" in ops.recall("nightly build bucket").text
    assert "artifacts-eu" not in ops.recall("nightly build bucket").text
    (old,) = w.store.get(first.ids, include_inactive=True)
    assert old.status == Status.INVALIDATED
    assert [
        e.dst for e in w.store.edges(event_id=new.ids[0], types=[EdgeType.SUPERSEDES])
    ] == first.ids
    files = MemoryFiles(ops)
    assert files.execute(
        {"command": "create", "path": "/memories/x.md", "file_text": "one"}
    ).startswith("File created")
    files.execute(
        {"command": "str_replace", "path": "/memories/x.md", "old_str": "one", "new_str": "two"}
    )
    assert files.execute({"command": "view", "path": "/memories/x.md"}).endswith("     1\ttwo")
    assert ops.forget(new.ids[0], "bucket retired").ids == new.ids[:1]
    assert "artifacts" not in ops.list().text
