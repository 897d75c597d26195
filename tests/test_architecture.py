"""The rooms of docs/architecture.md stay as drawn, read from the source with ``ast``.

- the room-level import graph has no cycle, and no product room imports the development tools
  (lazy and ``TYPE_CHECKING``-only imports count: they are dependencies too);
- every module is reachable by static imports from the CLI's doors (``lagscope.cli``'s
  ``_COMMAND_MODULES``) or from one of the few files run by path (``ENTRY_FILES``);
- each room has one door, its ``cli`` module, listed in ``_COMMAND_MODULES``, and every command
  has its place in ``lagscope --help`` (``_HELP_ORDER``);
- every package folder is in pyproject's ``packages`` (the wheel build needs them), and every
  listed package is on disk.

The folders and their import names come from pyproject's ``[tool.setuptools] package-dir``.
"""

from __future__ import annotations

import ast
import importlib
import itertools
import tomllib
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer.main

from lagscope import cli

ROOT = Path(__file__).resolve().parents[1]
_SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
#: import name → folder, one entry per room (``lagscope`` is the core)
PACKAGE_DIR: dict[str, str] = _SETUPTOOLS["package-dir"]
PACKAGES: list[str] = _SETUPTOOLS["packages"]

CORE = "lagscope"
DEVTOOLS = "lagscope.devtools"
ROOMS = sorted(PACKAGE_DIR)
PRODUCT = [room for room in ROOMS if room != DEVTOOLS]

#: modules nothing imports, because something runs them by path or by module name: module →
#: (a file, text in it that runs the module), so that an entry that stops being one is noticed
ENTRY_FILES: dict[str, tuple[str, str]] = {
    # `lagscope ui` runs `streamlit run <MAIN_SCRIPT>`, the app's main.py
    "lagscope.app.main": ("app/__init__.py", 'MAIN_SCRIPT = Path(__file__).with_name("main.py")'),
    # spark-submit's primary file: the image copies it to /opt/lagscope/spark-entry.py
    "lagscope.deploy.spark.entry": ("Dockerfile", "COPY deploy/spark/entry.py /opt/lagscope/spark-entry.py"),
    # each simulated client is its own process: `python -m lagscope.devtools.sim.worker SPEC`
    "lagscope.devtools.sim.worker": ("devtools/sim/runner.py", '"-m", "lagscope.devtools.sim.worker"'),
}


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # the imported lagscope module (or package)
    line: int


def _module_files() -> dict[str, Path]:
    """Every module of every room: import name → file."""
    modules: dict[str, Path] = {}
    for package, folder in PACKAGE_DIR.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if any(p.startswith(".") or p == "__pycache__" for p in parts):
                continue
            name = ".".join((package, *parts))
            modules[name.removesuffix(".__init__")] = path
    return modules


MODULES = _module_files()


def room_of(module: str) -> str:
    """The room a lagscope module belongs to: the longest package-dir entry that is its prefix."""
    return max((r for r in ROOMS if module == r or module.startswith(r + ".")), key=len)


def _is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def _resolve(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if not _is_package(module):
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _imports(module: str) -> list[Import]:
    """Every lagscope module ``module`` imports, wherever the import is (function bodies and
    ``if TYPE_CHECKING:`` blocks too); ``from pkg import sub`` counts as importing ``pkg.sub``."""
    tree = ast.parse(MODULES[module].read_text(), filename=str(MODULES[module]))
    found: list[Import] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [Import(module, alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, node)
            found.append(Import(module, base, node.lineno))
            found += [Import(module, f"{base}.{alias.name}", node.lineno) for alias in node.names
                      if f"{base}.{alias.name}" in MODULES]
    return [i for i in found if i.target == CORE or i.target.startswith(CORE + ".")]


IMPORTS = {module: _imports(module) for module in MODULES}


def _with_parents(module: str) -> list[str]:
    """``a.b.c`` runs ``a`` and ``a.b`` (their ``__init__``) first."""
    parts = module.split(".")
    return [".".join(parts[:n]) for n in range(1, len(parts) + 1)]


def _room_graph() -> dict[str, dict[str, list[Import]]]:
    graph: dict[str, dict[str, list[Import]]] = {room: defaultdict(list) for room in ROOMS}
    for imports in IMPORTS.values():
        for imp in imports:
            source, target = room_of(imp.module), room_of(imp.target)
            if source != target:
                graph[source][target].append(imp)
    return graph


def _cycle(graph: dict[str, dict[str, list[Import]]]) -> list[str] | None:
    """One cycle of rooms, or None."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(room: str) -> list[str] | None:
        state[room] = 1
        path.append(room)
        for nxt in sorted(graph[room]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[room] = 2
        return None

    for room in ROOMS:
        if room not in state and (found := visit(room)):
            return found
    return None


def _where(imp: Import) -> str:
    return f"{MODULES[imp.module].relative_to(ROOT)}:{imp.line} imports {imp.target}"


def test_the_rooms_import_each_other_without_a_cycle() -> None:
    graph = _room_graph()
    cycle = _cycle(graph)
    if cycle:
        edges = [f"{a} → {b}: " + "; ".join(_where(i) for i in graph[a][b][:3]) for a, b in itertools.pairwise(cycle)]
        pytest.fail("the rooms import each other in a cycle:\n  " + "\n  ".join(edges))


def test_no_product_room_imports_the_dev_tools() -> None:
    bad = [_where(imp) for module, imports in IMPORTS.items() if room_of(module) != DEVTOOLS
           for imp in imports if room_of(imp.target) == DEVTOOLS]
    assert not bad, "the product imports the development tools (move what they share into the product):\n" + \
        "\n".join(bad)


def test_the_core_imports_no_room() -> None:
    # the CLI names the rooms' doors as strings (_COMMAND_MODULES), which is no import
    bad = [_where(imp) for module, imports in IMPORTS.items() if room_of(module) == CORE
           for imp in imports if room_of(imp.target) != CORE]
    assert not bad, "\n".join(bad)


def test_every_import_names_a_module_that_exists() -> None:
    # keeps the graph honest: an import of a moved module would otherwise just drop out of it
    bad = [_where(imp) for imports in IMPORTS.values() for imp in imports if imp.target not in MODULES]
    assert not bad, "\n".join(bad)


def test_every_module_is_reachable_from_the_cli_or_an_entry_file() -> None:
    roots = ["lagscope.cli", *cli._COMMAND_MODULES, *ENTRY_FILES]
    seen: set[str] = set()
    todo = [m for root in roots for m in _with_parents(root)]
    while todo:
        module = todo.pop()
        if module in seen or module not in MODULES:
            continue
        seen.add(module)
        todo += [m for imp in IMPORTS[module] for m in _with_parents(imp.target)]
    unreached = sorted(set(MODULES) - seen)
    assert not unreached, ("modules no door imports (import them from their room's cli, or list a file run "
                           f"by path in ENTRY_FILES): {unreached}")


@pytest.mark.parametrize("module", sorted(ENTRY_FILES))
def test_entry_files_are_still_run_that_way(module: str) -> None:
    file, text = ENTRY_FILES[module]
    assert module in MODULES, f"{module} is gone: drop it from ENTRY_FILES"
    assert text in (ROOT / file).read_text(), f"{file} no longer runs {module}: is it still an entry file?"


def test_each_room_has_one_door_and_every_door_imports() -> None:
    doors = cli._COMMAND_MODULES
    assert len(doors) == len(set(doors)), f"a door is listed twice: {doors}"
    for door in doors:
        module: Any = importlib.import_module(door)
        assert callable(getattr(module, "register", None)), f"{door} has no register(app)"
    rooms = [room_of(door) for door in doors]
    assert sorted(rooms) == sorted(r for r in ROOMS if r != CORE), \
        f"one door per room (the core's is lagscope.cli itself): {dict(zip(doors, rooms, strict=True))}"
    assert all(door == f"{room_of(door)}.cli" for door in doors), f"a room's door is its cli module: {doors}"
    # and a room has no other cli module (a second door would bypass the table)
    extra = sorted(m for m in MODULES if m.rsplit(".", 1)[-1] == "cli" and m not in ["lagscope.cli", *doors])
    assert not extra, f"cli modules that are not a room's door: {extra}"


def test_every_command_has_its_place_in_the_help() -> None:
    root: Any = typer.main.get_command(cli.app)
    assert list(root.commands) == cli._HELP_ORDER


def test_every_package_folder_is_in_the_wheel() -> None:
    on_disk = sorted({m if _is_package(m) else m.rsplit(".", 1)[0] for m in MODULES})
    missing_init = sorted(m for m in on_disk if m not in MODULES)
    assert not missing_init, f"folders with modules but no __init__.py: {missing_init}"
    assert sorted(PACKAGES) == on_disk, (f"pyproject's packages: add {sorted(set(on_disk) - set(PACKAGES))}, "
                                         f"remove {sorted(set(PACKAGES) - set(on_disk))}")
