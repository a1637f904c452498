"""Structure checks read from the source with ``ast``: typed public API, explicit wiring,
Google-style docstrings on the public API.

They fail when someone reintroduces what issues 12 and 34 removed: ``Any`` in ``Weave``'s
public signatures, ``weave: Any`` parameters, parts reaching into the weave's closers or the
bus's listener list, any import cycle in the core (hints and function-level imports
counted), a core module importing a package above it or a framework, a second written
version, a protocol wider than a handful of members.
"""

from __future__ import annotations

import ast
import enum
import functools
import importlib
import importlib.util
import inspect
import os
import re
import subprocess
import sys
import textwrap
import types
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
        ("listeners", "beeweave_core.capture.bus"),
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


#: The most members (methods, properties, attributes) a protocol of the core declares in its
#: own body: a part depends only on the slice of a seam it uses (issue 34).  A composite such
#: as ``store.EventStore`` declares none: it is the union of narrow ones.
MAX_PROTOCOL_MEMBERS = 8
#: Seams still wider than that, at their present size: they may shrink, never grow.
WIDE_PROTOCOLS = {
    "beeweave_core.checkpoints.CheckpointStore": 17,
    "beeweave_core.index.base.VectorIndex": 13,
    "beeweave_core.items.ItemIndex": 10,
}


def _protocol_sizes(module: str, tree: ast.Module) -> dict[str, int]:
    """``module.Class`` -> members declared in its own body, for each ``Protocol`` class."""
    sizes = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        bases = [ast.unparse(b).split("[")[0].rsplit(".", 1)[-1] for b in node.bases]
        if "Protocol" not in bases:
            continue
        own = {n.name for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
        own |= {
            n.target.id
            for n in node.body
            if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
        }
        sizes[f"{module}.{node.name}"] = len(own)
    return sizes


def test_no_protocol_is_wider_than_a_handful() -> None:
    sizes = {
        k: v for m, tree in _sources("beeweave_core") for k, v in _protocol_sizes(m, tree).items()
    }
    wide = {k: n for k, n in sizes.items() if n > WIDE_PROTOCOLS.get(k, MAX_PROTOCOL_MEMBERS)}
    assert wide == {}
    assert set(WIDE_PROTOCOLS) <= set(sizes), "a listed wide protocol is gone: drop its entry"


def test_the_protocol_size_check_can_fail() -> None:
    methods = "".join(f"    def m{i}(self) -> None: ...\n" for i in range(MAX_PROTOCOL_MEMBERS))
    source = (
        "class Wide(typing.Protocol[T]):\n    x: int\n" + methods
        + "class Union(Wide, Narrow, Protocol):\n    '''All of them.'''\n"
        + "class Plain(Wide):\n    y: int\n"
    )  # fmt: skip
    sizes = _protocol_sizes("p.m", ast.parse(source))
    assert sizes == {"p.m.Wide": MAX_PROTOCOL_MEMBERS + 1, "p.m.Union": 0}
    assert sizes["p.m.Wide"] > MAX_PROTOCOL_MEMBERS


# --- Docstrings of the public API ------------------------------------------------------------
#
# The public API: every name in ``__all__`` of the packages below (followed to where it is
# defined), plus, for each exported class, the public methods, classmethods, staticmethods and
# properties that BeeWeave's own code defines -- in the class or in a BeeWeave base class, an
# override of a framework method included; members a framework base class defines and
# BeeWeave does not override are the framework's.  Names starting with ``_`` are private.

#: The packages whose ``__all__`` is the public API the docstring check covers.
API_PACKAGES = ("beeweave_core", "beeweave_langchain", "beeweave_llamaindex", "beeweave_mcp")
#: The least share of the public API that carries Google-style docstrings.
MIN_DOCUMENTED = 0.90
_SECTION = re.compile(r"^(\w[\w ]*):\s*$")
_ENTRY = re.compile(r"^(\*{0,2}\w+)\s*(\([^)]*\))?\s*:")
_MANGLED = re.compile(r"^_[A-Za-z]\w*?__(?=[A-Za-z])")


def _ours(owner: object) -> bool:
    return getattr(owner, "__module__", "").split(".")[0] in PACKAGES


def _sections(doc: str) -> dict[str, list[str]]:
    """A Google-style docstring's sections, each with the names its entries start with
    (``name:`` or ``name (type):`` at the section's first indentation)."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    indent: int | None = None
    for line in inspect.cleandoc(doc).splitlines():
        if not line.strip():
            continue
        depth = len(line) - len(line.lstrip())
        if depth == 0:
            match = _SECTION.match(line)
            current = out.setdefault(match.group(1), []) if match else None
            indent = None
        elif current is not None:
            indent = depth if indent is None else indent
            if depth == indent and (entry := _ENTRY.match(line.strip())):
                current.append(entry.group(1).lstrip("*"))
    return out


def _has_summary(doc: str) -> bool:
    """Whether a docstring opens with a sentence, not straight with a section."""
    first = inspect.cleandoc(doc).splitlines()[0]
    return bool(first.strip()) and not _SECTION.match(first)


def _parameters(fn: typing.Callable[..., object], *, bound: bool) -> list[str]:
    """The parameters a caller passes: ``self``/``cls`` left out, ``*args``/``**kw`` in, a
    class-private name as written (``__context``, not ``_Memory__context``)."""
    names = [_MANGLED.sub("__", n) for n in inspect.signature(fn).parameters]
    return names[1:] if bound and names and names[0] in ("self", "cls") else names


def _returns_value(fn: typing.Callable[..., object]) -> bool:
    """Whether ``fn`` gives its caller something: its return annotation when it has one, else
    a ``return <value>`` in its own body."""
    hint = inspect.signature(fn).return_annotation
    if hint is inspect.Signature.empty:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
        return any(isinstance(n, ast.Return) and n.value is not None and not (
            isinstance(n.value, ast.Constant) and n.value.value is None) for n in ast.walk(tree))  # fmt: skip
    return hint not in (None, type(None), typing.NoReturn, "None", "NoReturn", "Never")


def _function_gaps(fn: typing.Callable[..., object], *, bound: bool) -> list[str]:
    """What the docstring of ``fn`` lacks: a summary, ``Args:`` naming every parameter,
    ``Returns:`` (``Yields:`` for a generator) when it gives back something."""
    fn = inspect.unwrap(fn)
    doc = fn.__doc__
    if not doc or not doc.strip():
        return ["no docstring"]
    sections = _sections(doc)
    gaps = [] if _has_summary(doc) else ["no summary"]
    missing = [p for p in _parameters(fn, bound=bound) if p not in sections.get("Args", [])]
    if missing:
        gaps.append(f"Args lacks {', '.join(missing)}")
    generator = inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn)
    if generator and "Yields" not in sections:
        gaps.append("no Yields")
    elif not generator and _returns_value(fn) and "Returns" not in sections:
        gaps.append("no Returns")
    return gaps


def _constructor(cls: type) -> tuple[list[str], list[str]]:
    """What a caller passes to build ``cls``, as far as BeeWeave declares it, and the
    docstrings that may describe it.  The first ``__init__`` in the MRO, when BeeWeave
    wrote it, gives the parameters (described in its docstring or its class's); else the
    model fields BeeWeave declares are the parameters.  Enums and protocols are not built
    by callers."""
    if issubclass(cls, enum.Enum) or getattr(cls, "_is_protocol", False):
        return [], []
    for klass in cls.__mro__:
        if "__init__" in vars(klass):
            if _ours(klass):
                init = vars(klass)["__init__"]
                docs = [init.__doc__ or "", _class_doc(klass) or ""]
                return _parameters(init, bound=True), docs
            break
    fields = getattr(cls, "model_fields", None) or {}
    own = {n for k in cls.__mro__ if _ours(k) for n in vars(k).get("__annotations__", {})}
    return [name for name in fields if name in own], []


def _class_doc(cls: type) -> str | None:
    """The docstring written in the class body (a dataclass's generated one is not)."""
    return ast.get_docstring(ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0])


def _class_gaps(cls: type) -> list[str]:
    """A class is documented by its docstring and its constructor's arguments, described in
    the class docstring (``Args:``, or ``Attributes:`` for fields) or in the docstring of
    the ``__init__`` that builds it (or of the class that defines that ``__init__``)."""
    doc = _class_doc(cls)
    if not doc:
        return ["no docstring"]
    parameters, docs = _constructor(cls)
    described = set()
    for text in (doc, *docs):
        described |= set(_sections(text).get("Args", [])) | set(
            _sections(text).get("Attributes", [])
        )
    missing = [p for p in parameters if p not in described]
    return [f"constructor arguments not described: {', '.join(missing)}"] if missing else []


def _member_gaps(member: object) -> list[str] | None:
    """The gaps of one class member, or None when it is no method or property of
    BeeWeave's code (pydantic puts its own ``model_post_init`` into a model's class)."""
    if isinstance(member, property | functools.cached_property):
        fget = member.fget if isinstance(member, property) else member.func
        if not _ours(inspect.unwrap(fget)):
            return None
        return [] if (fget.__doc__ or "").strip() else ["no docstring"]
    bound = not isinstance(member, staticmethod)
    fn = member.__func__ if isinstance(member, staticmethod | classmethod) else member
    if not inspect.isfunction(fn) or not _ours(inspect.unwrap(fn)):
        return None
    return _function_gaps(fn, bound=bound)


def public_api(modules: typing.Iterable[types.ModuleType]) -> dict[str, list[str]]:
    """Every item of the public API of ``modules`` (by its defining name) and what its
    docstring lacks (an empty list: documented)."""
    items: dict[str, list[str]] = {}
    for module in modules:
        for name in module.__all__:
            obj = getattr(module, name)
            label = f"{obj.__module__}.{obj.__qualname__}"
            if not inspect.isclass(obj):
                items[label] = _function_gaps(obj, bound=False)
                continue
            items[label] = _class_gaps(obj)
            for attr in dir(obj):
                owner = next((k for k in obj.__mro__ if attr in vars(k)), None)
                if attr.startswith("_") or owner is None or not _ours(owner):
                    continue
                gaps = _member_gaps(vars(owner)[attr])
                if gaps is not None:
                    items[f"{owner.__module__}.{owner.__qualname__}.{attr}"] = gaps
    return items


def _coverage_report(items: dict[str, list[str]]) -> tuple[float, list[str]]:
    undocumented = [f"{name}: {'; '.join(gaps)}" for name, gaps in sorted(items.items()) if gaps]
    return 1 - len(undocumented) / max(len(items), 1), undocumented


def test_the_public_api_has_google_style_docstrings() -> None:
    """Args / Returns sections on at least ``MIN_DOCUMENTED`` of the public API."""
    for framework in ("langchain_core", "langgraph", "llama_index.core", "mcp"):
        pytest.importorskip(framework, reason="the public API spans every extra")
    items = public_api(importlib.import_module(pkg) for pkg in API_PACKAGES)
    share, undocumented = _coverage_report(items)
    print(f"documented: {share:.3f} of {len(items)} public API items")
    assert share >= MIN_DOCUMENTED, "\n".join(undocumented)


def test_the_docstring_check_can_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "fake.py"
    path.write_text(
        textwrap.dedent(
            '''
            from collections.abc import Iterator


            class Thing:
                """A thing."""

                def __init__(self, size: int) -> None: ...

                @property
                def area(self) -> int:
                    return 1

                def grow(self, by: int) -> int:
                    """Grow."""

                def shrink(self, by: int) -> int:
                    """Shrink.

                    Args:
                        by: how much.

                    Returns:
                        The new size.
                    """

                def parts(self) -> Iterator[int]:
                    """Returns:
                        The parts.
                    """
                    yield 1


            class Sized:
                """A thing whose constructor says what it takes."""

                def __init__(self, size: int) -> None:
                    """Make one.

                    Args:
                        size: how big.
                    """


            def make(size, **options):
                """Make.

                Args:
                    size: how big.
                """
                return size


            __all__ = ["Sized", "Thing", "make"]
            '''
        )
    )
    spec = importlib.util.spec_from_file_location("beeweave_core.docstring_fake", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # where inspect finds its source
    spec.loader.exec_module(module)
    items = public_api([module])
    fake = "beeweave_core.docstring_fake"
    assert items == {
        f"{fake}.Sized": [],
        f"{fake}.Thing": ["constructor arguments not described: size"],
        f"{fake}.Thing.area": ["no docstring"],
        f"{fake}.Thing.grow": ["Args lacks by", "no Returns"],
        f"{fake}.Thing.parts": ["no summary", "no Yields"],
        f"{fake}.Thing.shrink": [],
        f"{fake}.make": ["Args lacks options", "no Returns"],
    }
    share, undocumented = _coverage_report(items)
    assert share == pytest.approx(2 / 7)
    assert undocumented[0] == f"{fake}.Thing: constructor arguments not described: size"
