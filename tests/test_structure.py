"""Structure checks read from the source with ``ast``: typed public API, explicit wiring.

They fail when someone reintroduces what issues 12 and 34 removed: ``Any`` in ``Weave``'s
public signatures, ``weave: Any`` parameters, parts reaching into the weave's closers or the
bus's listener list, any import cycle in the core (hints and function-level imports
counted), a core module importing a package above it or a framework, a second written
version.
"""

from __future__ import annotations

import ast
import inspect
import os
import subprocess
import sys
import textwrap
import typing
from collections.abc import Container
from pathlib import Path

import pytest

import beeweave_core
from beeweave_core import weave as weave_module
from beeweave_core.weave import Weave

ROOT = Path(beeweave_core.__file__).resolve().parent.parent
PACKAGES = ["beeweave_core", "beeweave_cli", "beeweave_langchain", "beeweave_llamaindex",
            "beeweave_bench", "beeweave_demo", "beeweave_ui", "beeweave_mcp"]  # fmt: skip


def _sources(*packages: str) -> list[tuple[str, ast.Module]]:
    out = []
    for pkg in packages:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            out.append((module.removesuffix(".__init__"), ast.parse(path.read_text())))
    return out


def _public_methods() -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    tree = ast.parse(textwrap.dedent(inspect.getsource(Weave)))
    (cls,) = tree.body
    assert isinstance(cls, ast.ClassDef)
    return [
        fn
        for fn in cls.body
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
        and (not fn.name.startswith("_") or fn.name == "__init__")
    ]


def _type_checking_names() -> dict[str, object]:
    """What ``weave.py`` imports for annotations only, imported for real here."""
    tree = ast.parse(inspect.getsource(weave_module))
    ns: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            exec(compile(ast.Module(body=node.body, type_ignores=[]), "weave.py", "exec"), ns)
    return ns


def _mentions_any(hint: object, seen: set[int]) -> bool:
    if hint is typing.Any:
        return True
    if id(hint) in seen:
        return False
    seen.add(id(hint))
    if typing.is_typeddict(hint):  # **kw: Unpack[Options]: the options are the signature
        return any(_mentions_any(h, seen) for h in typing.get_type_hints(hint).values())
    return any(_mentions_any(a, seen) for a in typing.get_args(hint))


def test_every_public_weave_signature_is_fully_annotated_without_any() -> None:
    methods = _public_methods()
    assert {"open", "retrieve", "aretrieve", "assemble", "aassemble", "stats", "retriever",
            "context", "on_close", "emit"} <= {fn.name for fn in methods}  # fmt: skip
    for fn in methods:
        args = fn.args
        params = [*args.posonlyargs, *args.args, *args.kwonlyargs]
        params = [a for a in params if a.arg not in ("self", "cls")]
        params += [a for a in (args.vararg, args.kwarg) if a is not None]
        for node in [*(a.annotation for a in params), fn.returns]:
            assert node is not None, f"Weave.{fn.name}: a parameter or the return is untyped"
            names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            names |= {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
            assert "Any" not in names, f"Weave.{fn.name}: {ast.unparse(node)}"


def test_weave_annotations_resolve_to_real_types_without_any() -> None:
    localns = _type_checking_names()
    for fn in _public_methods():
        member = inspect.getattr_static(Weave, fn.name)
        func = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
        hints = typing.get_type_hints(func, vars(weave_module), localns)
        assert "return" in hints, fn.name
        for name, hint in hints.items():
            assert not _mentions_any(hint, set()), f"Weave.{fn.name}({name}): {hint}"


def _annotation_has_any(node: ast.expr | None) -> bool:
    return node is not None and any(
        (isinstance(n, ast.Name) and n.id == "Any")
        or (isinstance(n, ast.Attribute) and n.attr == "Any")
        for n in ast.walk(node)
    )


def test_no_weave_parameter_or_field_is_typed_any() -> None:
    found = []
    for module, tree in _sources(*PACKAGES):
        for node in ast.walk(tree):
            is_param = isinstance(node, ast.arg) and node.arg == "weave"
            is_field = isinstance(node, ast.AnnAssign) and ast.unparse(node.target) == "weave"
            if (is_param or is_field) and (
                node.annotation is None or _annotation_has_any(node.annotation)
            ):
                found.append(f"{module}:{node.lineno}")
    assert found == []


@pytest.mark.parametrize(
    ("attribute", "home"),
    [
        ("_closers", "beeweave_core.weave"),
        ("listeners", "beeweave_core.bus"),
        ("options", None),
    ],  # fmt: skip
)
def test_parts_use_on_close_and_subscribe_not_the_lists_behind_them(
    attribute: str, home: str | None
) -> None:
    """``weave.options`` is gone; the closers and listeners lists belong to their class."""
    users = [
        f"{module}:{node.lineno}"
        for module, tree in _sources(*PACKAGES)
        if module != home
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr == attribute
        and ast.unparse(node.value).split(".")[-1] in ("weave", "bus", "self.weave", "_weave")
    ]
    assert users == []


def _imports(module: str, tree: ast.Module, *, type_only: bool = False) -> set[str]:
    """Modules ``module`` imports at run time, in functions too; ``type_only``: also those
    of ``if TYPE_CHECKING:`` blocks (a hint is a dependency as well)."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if type_only:
            break
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            skip |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
    return out


def _module_imports(module: str, tree: ast.Module, modules: Container[str]) -> set[str]:
    """Every module of ``modules`` that ``module`` imports: at the top, in a function, or for
    type hints only.  ``from package import module`` is an import of that module (the
    package's ``__init__`` runs first for any of its modules, so it orders nothing)."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                out.add(sub if sub in modules else node.module)
        elif isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
    return {m for m in out if m in modules and m != module}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of ``graph``: its strongly connected parts of two modules or more."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        order[node] = low[node] = len(order)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in order:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], order[nxt])
        if low[node] == order[node]:
            part = stack[stack.index(node) :]
            del stack[stack.index(node) :]
            if len(part) > 1:
                found.append(sorted(part))

    for node in sorted(graph):
        if node not in order:
            visit(node)
    return sorted(found)


def core_import_graph() -> dict[str, set[str]]:
    sources = dict(_sources("beeweave_core"))
    return {m: _module_imports(m, tree, sources) for m, tree in sources.items()}


def test_no_import_cycle_in_the_core() -> None:
    """Every import in the core points down: type-only and function-level ones included."""
    assert _cycles(core_import_graph()) == []


def test_the_cycle_check_finds_a_cycle_hidden_in_hints_and_functions() -> None:
    source = {
        "p.a": "from p import b\n",
        "p.b": "def f():\n    from p.c import x\n",
        "p.c": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from p.a import A\n",
        "p.d": "import p.a\n",
    }
    graph = {m: _module_imports(m, ast.parse(s), source) for m, s in source.items()}
    assert _cycles(graph) == [["p.a", "p.b", "p.c"]]


#: The packages above the core: it imports none of them, not even in a function.
PRODUCT = ("beeweave_bench", "beeweave_ui", "beeweave_mcp", "beeweave_demo", "beeweave_cli")


def test_the_core_imports_no_product_package() -> None:
    found = sorted(
        f"{module} imports {target}"
        for module, tree in _sources("beeweave_core")
        for target in _imports(module, tree, type_only=True)
        if target.split(".")[0] in PRODUCT
    )
    assert found == []


def test_the_product_import_check_can_fail() -> None:
    tree = ast.parse("def f():\n    from beeweave_bench import report\n")
    assert "beeweave_bench" in _imports("beeweave_core.x", tree, type_only=True)


def test_the_command_loads_other_packages_only_when_named(tmp_path: Path) -> None:
    """``beeweave sessions`` imports no benchmark, UI, MCP or demo module; ``beeweave ui``
    imports the UI's command (and only that package's)."""
    script = (
        "import sys\n"
        "from beeweave_cli.app import app\n"
        "try:\n"
        "    app(sys.argv[1:], standalone_mode=False)\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted({m.split('.')[0] for m in sys.modules if m.startswith('beeweave_')}))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BEEWEAVE_HOME": str(tmp_path / "home")}

    def loaded(*args: str) -> list[str]:
        done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True,
                              text=True, env=env, timeout=120, cwd=tmp_path)  # fmt: skip
        return ast.literal_eval(done.stdout.strip().splitlines()[-1])

    assert loaded("sessions", "--url", f"sqlite:///{tmp_path / 'x.db'}") == [
        "beeweave_cli", "beeweave_core"
    ]  # fmt: skip
    assert loaded("ui", "--help") == ["beeweave_cli", "beeweave_core", "beeweave_ui"]


#: Frameworks the core never imports (their integration packages translate into it).
FRAMEWORKS = ("langchain", "langgraph", "llama_index")


def framework_imports(module: str, tree: ast.Module) -> list[str]:
    """What of a framework ``module`` imports: at the top, in a function, in a ``try``, or
    for type hints only."""
    return sorted(
        f"{module} imports {target}"
        for target in _imports(module, tree, type_only=True)
        if target.split(".")[0].startswith(FRAMEWORKS)
    )


def test_the_core_imports_no_framework() -> None:
    """Not even in a function or a ``try``: the built-in models' LangChain view is
    ``beeweave_langchain.BeeWeaveEmbeddings``."""
    found = [
        hit for module, tree in _sources("beeweave_core") for hit in framework_imports(module, tree)
    ]
    assert found == []


def test_the_framework_import_check_can_fail() -> None:
    source = (
        "try:\n    from langchain_core.embeddings import Embeddings\nexcept ImportError:\n"
        "    pass\n"
        "def view():\n    from langchain_chroma import Chroma\n"
        "def node():\n    import llama_index.core\n"
    )
    assert framework_imports("beeweave_core.x", ast.parse(source)) == [
        "beeweave_core.x imports langchain_chroma",
        "beeweave_core.x imports langchain_chroma.Chroma",
        "beeweave_core.x imports langchain_core.embeddings",
        "beeweave_core.x imports langchain_core.embeddings.Embeddings",
        "beeweave_core.x imports llama_index.core",
    ]


def test_the_embedder_stays_importable_from_its_old_homes() -> None:
    from beeweave_core import embedding_base, index
    from beeweave_core.index import base

    assert base.Embedder is index.Embedder is embedding_base.Embedder


def test_paths_stay_importable_from_their_old_homes() -> None:
    from beeweave_core import paths
    from beeweave_core.weave import beeweave_home, default_url

    assert beeweave_home is paths.beeweave_home and beeweave_core.beeweave_home is beeweave_home
    assert default_url is paths.default_url


def test_the_version_is_written_once() -> None:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        tomllib = pytest.importorskip("tomli")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "beeweave_core.__version__"
    }
    assert isinstance(beeweave_core.__version__, str) and beeweave_core.__version__.count(".") == 2


#: The longest a function may be: one screen, read at once.
MAX_FUNCTION_LINES = 60
#: Underscore names that are public API of the standard library (namedtuple, os).
PUBLIC_UNDERSCORED = frozenset({"_replace", "_asdict", "_fields", "_make", "_exit"})


def test_no_function_is_longer_than_a_screen() -> None:
    long = [
        f"{name}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for name, tree in _sources(*PACKAGES)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (node.end_lineno or node.lineno) - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert long == []


def _own_names(tree: ast.Module) -> set[str]:
    """Names a module defines itself: its functions, classes, and ``self.``/``cls.`` fields."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id in ("self", "cls"):
                names.add(node.attr)
        elif isinstance(node, ast.Name):
            names.add(node.id)
    return names


def _foreign_private_reads(tree: ast.Module) -> list[str]:
    own = _own_names(tree) | PUBLIC_UNDERSCORED
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and node.attr.startswith("_")):
            continue
        if node.attr.startswith("__") or node.attr in own:
            continue
        value = node.value
        if isinstance(value, ast.Name) and value.id in ("self", "cls"):
            continue
        out.append(f"{node.lineno}: {ast.unparse(value)[:40]}.{node.attr}")
    return out


def test_no_module_reads_another_objects_private_attributes() -> None:
    found = {
        name: bad for name, tree in _sources(*PACKAGES) if (bad := _foreign_private_reads(tree))
    }
    assert found == {}


def test_the_private_attribute_check_can_fail() -> None:
    tree = ast.parse("def f(weave):\n    return weave._closers\n")
    assert _foreign_private_reads(tree) == ["2: weave._closers"]
