"""The memory-tool command set (``view``, ``create``, ``str_replace``, ``insert``,
``delete``, ``rename`` over ``/memories``) backed by BeeWeave.

Models trained on Anthropic's client-side ``memory`` tool manage a directory of memory
files.  Here each file is a chain of ``memory`` events in the agent's namespace (see
:mod:`beeweave_core.memory_ops`): creating a file writes version 1, every edit writes the
next version with a SUPERSEDES edge to the one it replaces (which is invalidated, not
deleted), a rename is a new version under the new path, and a delete invalidates the
chain's head with a reason.  So files are searchable by ``recall`` and by the fused
retriever, every edit is in the audit trail, and nothing a purge should remove hides
in a side store.

Directories are implicit: a directory exists while a file lives under it.  Paths must
stay inside ``/memories``; traversal (``..``), percent-encoded or look-alike forms,
backslashes, control characters and anything outside the root are refused with one
clear line.  Results are the strings the tool's documentation describes; errors start
with ``Error:`` and never raise into the host agent.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from beeweave_core.errors import invalid_line, shown
from beeweave_core.events import Event, EventType
from beeweave_core.memory_ops import MemoryOpError, MemoryOps, checked_text, namespace

ROOT = "/memories"
#: A memory file is a note, not a data dump; bigger writes are refused.
MAX_FILE_CHARS = 100_000
MAX_PATH_CHARS = 512
SNIPPET_LINES = 4
COMMANDS = ("view", "create", "str_replace", "insert", "delete", "rename")
TOOL_DESCRIPTION = (
    "Memory files under /memories that persist across sessions: commands view, create, "
    "str_replace, insert, delete, rename. Check /memories before starting a task."
)


class PathError(ValueError):
    """A path the memory tool must not touch."""


class MemoryCommand(BaseModel):
    """One call of the ``memory`` tool (the fields of every command, each optional)."""

    command: str = Field(description="view, create, str_replace, insert, delete or rename.")
    path: str | None = Field(None, description="A path under /memories.")
    view_range: list[int] | None = Field(None, description="view: [first, last] line; -1 = end.")
    file_text: str | None = Field(None, description="create: the file's content.")
    old_str: str | None = Field(None, description="str_replace: text that occurs exactly once.")
    new_str: str | None = Field(None, description="str_replace: its replacement.")
    insert_line: int | None = Field(None, description="insert: line after which to insert.")
    insert_text: str | None = Field(None, description="insert: the text to insert.")
    old_path: str | None = Field(None, description="rename: the current path.")
    new_path: str | None = Field(None, description="rename: the new path.")


def check_path(path: object) -> str:
    """``path`` normalised (no trailing slash) if it is safely inside ``/memories``."""
    if not isinstance(path, str) or not path:
        raise PathError("Error: a path under /memories is required")
    if len(path) > MAX_PATH_CHARS:
        raise PathError(f"Error: path is longer than {MAX_PATH_CHARS} characters")
    if any(ch in path for ch in ("\\", "%", "\x00")) or any(
        unicodedata.category(ch).startswith("C") for ch in path
    ):
        raise PathError(
            f"Error: path {shown(path)} contains a backslash, '%', or control "
            "characters; use plain /memories/... paths"
        )
    if unicodedata.normalize("NFKC", path) != path:
        raise PathError(f"Error: path {shown(path)} is not in normal form (look-alike characters)")
    trimmed = path[:-1] if path.endswith("/") and path != "/" else path
    if trimmed != ROOT and not trimmed.startswith(ROOT + "/"):
        raise PathError(
            f"Error: path {shown(path)} is outside {ROOT}; all memory paths start with {ROOT}/"
        )
    for part in trimmed.split("/")[2:]:
        if part in ("", ".", ".."):
            raise PathError(f"Error: path {shown(path)} has an empty, '.' or '..' segment")
    return trimmed


class MemoryFiles:
    """A ``memory`` tool handler whose files are BeeWeave memory events.

    ``ops`` fixes the tenant, user, agent and namespace (``scope``) the files live in.
    :meth:`execute` takes the tool call's input (a dict) and returns the result text.
    """

    def __init__(self, ops: MemoryOps, *, scope: str | None = None) -> None:
        self.ops = ops
        self.ns = namespace(ops.user_id, scope or ops.scope)

    def execute(self, command: Mapping[str, Any], *, session_id: str | None = None) -> str:
        """Run one command; every problem comes back as an ``Error: ...`` line."""
        try:
            cmd = MemoryCommand.model_validate(dict(command))
        except (ValidationError, TypeError, ValueError) as exc:
            return f"Error: invalid memory command: {invalid_line(exc)}"
        handler = getattr(self, f"_{cmd.command}", None) if cmd.command in COMMANDS else None
        if handler is None:
            return f"Error: unknown command {shown(cmd.command)}; use one of {', '.join(COMMANDS)}"
        try:
            return str(handler(cmd, session_id))
        except (PathError, MemoryOpError) as exc:
            text = str(exc)
            return text if text.startswith("Error:") else f"Error: {text}"

    # ------------------------------------------------------------ reading
    def files(self) -> dict[str, Event]:
        """Current files by path (the head of each version chain)."""
        out: dict[str, Event] = {}
        for m in self.ops.weave.store.timeline(self.ns, types=(EventType.MEMORY,)):
            path = m.payload.get("path")
            if isinstance(path, str):
                out[path] = m
        return out

    def _view(self, cmd: MemoryCommand, session_id: str | None) -> str:
        path = check_path(cmd.path)
        files = self.files()
        if path in files:
            return _numbered(path, files[path].content, cmd.view_range)
        under = {p: e for p, e in files.items() if p.startswith(path + "/")}
        if path != ROOT and not under:
            return f"The path {path} does not exist. Please provide a valid path."
        return _listing(path, under)

    # ------------------------------------------------------------ writing
    def _create(self, cmd: MemoryCommand, session_id: str | None) -> str:
        path = self._file_path(cmd.path)
        text = _file_text(cmd.file_text)
        files = self.files()
        if path in files:
            return f"Error: File {path} already exists"
        if any(p.startswith(path + "/") for p in files):
            return f"Error: {path} is a directory"
        if (file := _file_above(path, files)) is not None:
            return f"Error: {file} is a file, not a directory"
        self._save(path, text, None, session_id)
        return f"File created successfully at: {path}"

    def _str_replace(self, cmd: MemoryCommand, session_id: str | None) -> str:
        path, head = self._existing(cmd.path)
        old, new = cmd.old_str, cmd.new_str if cmd.new_str is not None else ""
        if not old:
            return "Error: str_replace needs a non-empty old_str"
        count = head.content.count(old)
        if count == 0:
            return (
                f"No replacement was performed, old_str `{old}` did not appear verbatim in {path}."
            )
        if count > 1:
            lines = [i + 1 for i, ln in enumerate(head.content.split("\n")) if old in ln]
            return (
                f"No replacement was performed. Multiple occurrences of old_str `{old}` "
                f"in lines: {lines}. Please ensure it is unique"
            )
        text = _file_text(head.content.replace(old, new, 1))
        self._save(path, text, head, session_id)
        at = head.content[: head.content.index(old)].count("\n")
        return "The memory file has been edited.\n" + _snippet(text, at, new.count("\n") + 1)

    def _insert(self, cmd: MemoryCommand, session_id: str | None) -> str:
        path, head = self._existing(cmd.path)
        lines = head.content.split("\n") if head.content else []
        n = cmd.insert_line
        if n is None or not 0 <= n <= len(lines) or cmd.insert_text is None:
            return (
                f"Error: Invalid `insert_line` parameter: {n}. It should be within the "
                f"range of lines of the file: [0, {len(lines)}]"
            )
        added = cmd.insert_text.rstrip("\n").split("\n")
        text = _file_text("\n".join([*lines[:n], *added, *lines[n:]]))
        self._save(path, text, head, session_id)
        return f"The file {path} has been edited."

    def _delete(self, cmd: MemoryCommand, session_id: str | None) -> str:
        path = check_path(cmd.path)
        if path == ROOT:
            return f"Error: cannot delete the {ROOT} directory itself"
        files = self.files()
        gone = [e for p, e in files.items() if p == path or p.startswith(path + "/")]
        if not gone:
            return f"Error: The path {path} does not exist"
        self.ops.writer.invalidate([e.id for e in gone], f"deleted via the memory tool: {path}")
        return f"Successfully deleted {path}"

    def _rename(self, cmd: MemoryCommand, session_id: str | None) -> str:
        old, new = check_path(cmd.old_path), self._file_path(cmd.new_path)
        files = self.files()
        moving = {p: e for p, e in files.items() if p == old or p.startswith(old + "/")}
        if old == ROOT or not moving:
            return f"Error: The path {old} does not exist"
        if new in files or any(p.startswith(new + "/") for p in files):
            return f"Error: The destination {new} already exists"
        if (file := _file_above(new, files)) is not None:
            return f"Error: {file} is a file, not a directory"
        if new.startswith(old + "/"):
            return f"Error: cannot move {old} inside itself"
        for p, head in moving.items():
            self._save(new + p[len(old) :], head.content, head, session_id, moved_from=p)
        return f"Successfully renamed {old} to {new}"

    # ------------------------------------------------------------ helpers
    def _file_path(self, path: object) -> str:
        p = check_path(path)
        if p == ROOT:
            raise PathError(f"Error: {ROOT} is the directory itself; name a file under it")
        return p

    def _existing(self, path: object) -> tuple[str, Event]:
        p = self._file_path(path)
        head = self.files().get(p)
        if head is None:
            raise PathError(f"Error: The path {p} does not exist. Please provide a valid path.")
        return p, head

    def _save(
        self,
        path: str,
        text: str,
        previous: Event | None,
        session_id: str | None,
        *,
        moved_from: str | None = None,
    ) -> Event:
        """Write the next version of ``path``; the one it replaces is invalidated."""
        ops = self.ops
        extra: dict[str, Any] = {"path": path}
        if moved_from:
            extra["renamed_from"] = moved_from
        sources = list((previous.payload.get("source_ids") or ()) if previous else ())
        sources += [s for s in ops.sources_for(None, session_id) if s not in sources]
        mem = ops.write_memory(
            self.ns,
            text,
            "artifact",
            ["file"],
            sources,
            [previous.id] if previous else [],
            previous=previous,
            payload=extra,
        )
        if previous is not None:
            why = f"renamed to {path}" if moved_from else f"edited ({path})"
            ops.writer.invalidate([previous.id], f"{why} by {mem.id}", by=mem.id)
        return mem


def _file_above(path: str, files: Mapping[str, Event]) -> str | None:
    """The existing file that ``path`` would sit under (a file is not a directory)."""
    parent = path.rsplit("/", 1)[0]
    while parent.startswith(ROOT + "/"):
        if parent in files:
            return parent
        parent = parent.rsplit("/", 1)[0]
    return None


def _file_text(text: str | None) -> str:
    if text is None:
        raise PathError("Error: file_text is required")
    return checked_text(text, MAX_FILE_CHARS, "file text")


def _numbered(path: str, text: str, view_range: Sequence[int] | None) -> str:
    lines = text.split("\n")
    first, last = 1, len(lines)
    if view_range is not None:
        if (
            len(view_range) != 2
            or view_range[0] < 1
            or view_range[0] > len(lines)
            or (view_range[1] != -1 and not view_range[0] <= view_range[1] <= len(lines))
        ):
            return (
                f"Error: Invalid `view_range` parameter: {list(view_range)}. Lines are "
                f"numbered 1 to {len(lines)}; use [first, last] or [first, -1]"
            )
        first, last = view_range[0], (len(lines) if view_range[1] == -1 else view_range[1])
    body = "\n".join(f"{i:6d}\t{lines[i - 1]}" for i in range(first, last + 1))
    return f"Here's the content of {path} with line numbers:\n{body}"


def _snippet(text: str, at: int, span: int) -> str:
    lines = text.split("\n")
    lo, hi = max(0, at - SNIPPET_LINES), min(len(lines), at + span + SNIPPET_LINES)
    return "\n".join(f"{i + 1:6d}\t{lines[i]}" for i in range(lo, hi))


def _size(n: int) -> str:
    """Human-readable size, as ``du -h`` prints it."""
    if n < 1024:
        return str(n)
    return f"{n / 1024:.1f}K" if n < 1024 * 1024 else f"{n / (1024 * 1024):.1f}M"


def _listing(path: str, under: Mapping[str, Event]) -> str:
    """Files and directories up to two levels below ``path``, with sizes (hidden ones
    -- a segment starting with '.' -- left out)."""
    sizes: dict[str, int] = {path: 0}
    for p, e in under.items():
        rel = p[len(path) + 1 :].split("/")
        if any(part.startswith(".") for part in rel):
            continue
        n = len(e.content.encode())
        sizes[path] += n
        for depth in range(1, min(2, len(rel)) + 1):
            sub = f"{path}/{'/'.join(rel[:depth])}"
            sizes[sub] = sizes.get(sub, 0) + n
    rows = "\n".join(f"{_size(sizes[p])}\t{p}" for p in sorted(sizes))
    return (
        f"Here're the files and directories up to 2 levels deep in {path}, excluding "
        f"hidden items and node_modules:\n{rows}"
    )


__all__ = [
    "COMMANDS",
    "ROOT",
    "TOOL_DESCRIPTION",
    "MemoryCommand",
    "MemoryFiles",
    "PathError",
    "check_path",
]
