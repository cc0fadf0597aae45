"""The import graph of ssmrepro/ is one-way: layers below never import layers above, no cycles.

Every import counts, at module level or inside a function (a function-level import that goes up a
layer would only hide a cycle). Layers, bottom to top (README "Layout"):

    util, expr, signals                     foundation
    kernels, theory, data, optim            libraries without project dependencies
    tasks -> models -> analysis             libraries
    spec -> sweep -> store -> train -> engine -> report -> plots   the pipeline stages
    bench, cli                              tools on top
    __main__                                the `ssmrepro` entry point (imports cli)
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "ssmrepro"

LAYERS = [
    ["util", "expr", "signals"],
    ["kernels", "theory", "data", "optim"],
    ["tasks"],
    ["models"],
    ["analysis"],
    ["spec"],
    ["sweep"],
    ["store"],
    ["train"],
    ["engine"],
    ["report"],
    ["plots"],
    ["bench"],
    ["cli"],
    ["__main__"],
]
RANK = {name: i for i, names in enumerate(LAYERS) for name in names}


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[str, int]]:
    """(absolute ssmrepro module imported, line) for every import statement in the file."""
    me = _module_name(path)
    package = me if path.name == "__init__.py" else me.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names if a.name.startswith("ssmrepro")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if not mod.startswith("ssmrepro"):
                continue
            if node.module is None or mod in _all_modules():  # from . import x -> the submodules
                subs = [f"{mod}.{a.name}" for a in node.names]
                out += [(s if s in _all_modules() else mod, node.lineno) for s in subs]
            else:
                out.append((mod, node.lineno))
    return out


_MODULES: set[str] = set()


def _all_modules() -> set[str]:
    if not _MODULES:
        _MODULES.update(_module_name(p) for p in PKG.rglob("*.py"))
    return _MODULES


def _component(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else ""


def _graph() -> dict[str, list[tuple[str, int]]]:
    return {_module_name(p): _imports(p) for p in sorted(PKG.rglob("*.py"))}


def test_every_component_has_a_layer():
    comps = {_component(m) for m in _all_modules()} - {""}
    assert comps <= set(RANK), f"components without a layer: {sorted(comps - set(RANK))}"


def test_no_import_goes_up_a_layer():
    bad = []
    for mod, imps in _graph().items():
        src = _component(mod)
        for target, line in imps:
            dst = _component(target)
            if not src or not dst or src == dst:
                continue
            if RANK[dst] >= RANK[src]:
                bad.append(f"{mod}:{line} imports {target} ({src} is layer {RANK[src]}, "
                           f"{dst} is layer {RANK[dst]})")
    assert not bad, "upward or sideways imports:\n" + "\n".join(bad)


def test_no_import_cycles():
    graph = {m: sorted({t for t, _ in imps if t in _all_modules() and t != m})
             for m, imps in _graph().items()}
    # a package's __init__ importing its own submodules is how a package exposes its API; a
    # submodule importing its package's __init__ back would close a cycle and is caught below
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in graph.get(m, []):
            if state.get(t) == 1:
                cycles.append(" -> ".join(stack[stack.index(t):] + [t]))
            elif t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in graph:
        if m not in state:
            visit(m)
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


@pytest.mark.parametrize("path", sorted(PKG.rglob("*.py")), ids=lambda p: _module_name(p))
def test_every_module_says_its_layer_first(path):
    """The first docstring line names the stage or layer the module belongs to."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    first = doc.splitlines()[0] if doc else ""
    words = ("Stage", "Library", "Foundation", "Tool", "Package")
    assert first.startswith(words), f"{path.relative_to(PKG.parent)}: first line {first!r}"
