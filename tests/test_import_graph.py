"""sparse_tui's import graph, read from the modules' source (every ``import`` statement, also those inside
functions), has no cycle and no import from a lower layer to a higher one. Circles make import order matter and
hide layering mistakes (the training loop and the model code used to import each other through ``lr_factor``).

``LAYERS`` is the one definition of the package's layers (docs/ARCHITECTURE.md, "Layers", describes it): a module
may import modules of its own layer and of the layers before it, never of a layer after it. Every module belongs to
exactly one layer (the longest prefix that names it), so a new module is placed here when it is written."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "sparse_tui"

# Lowest first. A name is a module or a package (with everything under it).
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("sparse_tui.base", "sparse_tui.science.schedule", "sparse_tui.science.repetition",
              "sparse_tui.science.theory")),
    ("config and store", ("sparse_tui.presets", "sparse_tui.store", "sparse_tui.atlas")),
    ("science", ("sparse_tui.science", "sparse_tui.tasks", "sparse_tui.models")),
    ("training", ("sparse_tui.training",)),
    ("lifecycle and reports", ("sparse_tui.lifecycle", "sparse_tui.export", "sparse_tui.executors",
                               "sparse_tui.science.forecast", "sparse_tui.reports.fitreport",
                               "sparse_tui.reports.selection",
                               "sparse_tui.science.phase", "sparse_tui.track")),
    ("commands", ("sparse_tui.reports",)),
    ("console", ("sparse_tui.tui",)),
    # the package's face: its __init__ offers sparse_tui.init (the logging API, loaded when called) and the version
    ("cli", ("sparse_tui.cli", "sparse_tui.__main__", "sparse_tui")),
]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in PKG.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for mod, path in modules.items():
        package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([base] if base else []))
                # ``from pkg import submodule`` imports the submodule, as ``import pkg.submodule`` does (the
                # package's __init__ runs for both, and neither is counted as importing it); a name that is not
                # a submodule is taken from the package (or module) itself
                subs = [f"{base}.{a.name}" for a in node.names]
                targets = ([base] if any(s not in modules for s in subs) else []) + subs
            for t in targets:
                if t in modules and t != mod:
                    graph[mod].add(t)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def layer_of(module: str) -> int | None:
    """The index in ``LAYERS`` of the longest name that is ``module`` or a package above it (the top package,
    ``sparse_tui``, names only its ``__init__``); None: in no layer."""
    best, found = -1, None
    for i, (_, names) in enumerate(LAYERS):
        for n in names:
            if (module == n or n != "sparse_tui" and module.startswith(n + ".")) and len(n) > best:
                best, found = len(n), i
    return found


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Each import of a module from a higher layer, as 'importer (layer) -> imported (layer)'."""
    name = [n for n, _ in LAYERS]
    return sorted(f"{m} ({name[layer_of(m)]}) -> {t} ({name[layer_of(t)]})"
                  for m, ts in graph.items() for t in ts if layer_of(t) > layer_of(m))


def test_the_graph_sees_imports_inside_functions():
    g = import_graph()
    assert "sparse_tui.science.fitting" in g["sparse_tui.tui.selection"]  # a lazy import inside a function
    assert "sparse_tui.training.loop" in g["sparse_tui.training.trainer"]


def test_no_import_circles_in_sparse_tui():
    found = cycles(import_graph())
    assert found == [], f"import circles: {found}"


def test_every_module_is_in_one_layer():
    assert [m for m in import_graph() if layer_of(m) is None] == []
    assert layer_of("sparse_tui.new_module") is None  # a new module is placed by hand
    names = [n for _, ns in LAYERS for n in ns]
    assert len(names) == len(set(names))


def test_no_import_from_a_lower_layer_to_a_higher_one():
    found = upward_imports(import_graph())
    assert found == [], "imports against the layer order:\n" + "\n".join(found)


def test_the_layer_check_finds_an_upward_import():
    """The check is not vacuous: the models importing the training package (as ode.py did through lr_factor) and
    the store importing the console are reported."""
    g = {"sparse_tui.models.ode": {"sparse_tui.training.loop"}, "sparse_tui.store": {"sparse_tui.tui.app"},
         "sparse_tui.tui.app": {"sparse_tui.store"}, "sparse_tui.training.loop": set()}
    assert upward_imports(g) == [
        "sparse_tui.models.ode (science) -> sparse_tui.training.loop (training)",
        "sparse_tui.store (config and store) -> sparse_tui.tui.app (console)",
    ]


def test_the_architecture_doc_names_the_layers_in_order():
    """docs/ARCHITECTURE.md's "Layers" section lists the same layers in the same order as ``LAYERS``."""
    doc = (PKG.parent / "docs" / "ARCHITECTURE.md").read_text()
    section = doc.split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[2].strip() for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows[1:] == [n for n, _ in LAYERS]


# Names a package's __init__ offers from its modules as the package's API (not used in the __init__ itself).
PACKAGE_API: dict[str, set[str]] = {
    "sparse_tui": {"__version__"},  # sparse_tui.__version__, as every Python package offers it
    "sparse_tui.store": {"DB_NAME", "STATUSES", "TERMINAL", "RunRecord", "StoreError", "default_runs_dir",
                         "is_disk_full", "pid_alive", "SCHEMA_VERSION"},
}


def unused_package_imports() -> list[str]:
    """Names a module imports from sparse_tui at its top level and never uses: a re-export for an old import path
    (a shim) or dead code. A name counts as used when the module's code or a string annotation names it."""
    out = []
    for path in PKG.rglob("*.py"):
        mod = module_name(path)
        tree = ast.parse(path.read_text(), str(path))
        imported: dict[str, int] = {}
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("sparse_tui")):
                for a in node.names:
                    imported[a.asname or a.name] = node.lineno
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        notes = [n.annotation for n in ast.walk(tree) if isinstance(n, (ast.arg, ast.AnnAssign)) and n.annotation]
        notes += [n.returns for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        strings = " ".join(c.value for a in notes if a for c in ast.walk(a) if isinstance(c, ast.Constant)
                           and isinstance(c.value, str))
        for name, line in imported.items():
            if name not in names and name not in strings and name not in PACKAGE_API.get(mod, ()):
                out.append(f"{path.relative_to(PKG.parent)}:{line}: {name}")
    return sorted(out)


def test_no_name_is_imported_only_to_be_re_exported():
    found = unused_package_imports()
    assert found == [], "imported and never used (a re-export shim, or dead):\n" + "\n".join(found)
