"""The package's layers, read from the source: analysis never reaches the measuring side.

Every ``import`` statement of a module counts, at module level or inside a function (a
lazy import still runs when the function does), and the walk follows the package's own
modules transitively. The pure analysis modules and the record layer must reach neither
torch nor triton nor the modules that measure (``sweep``, ``candidates``), so a notebook
or a reviewer can load and analyse a run on a machine without them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = "attn_analysis"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE

# Pure analysis: DataFrames and numbers in, DataFrames, numbers and text out.
ANALYSIS = ("_validate", "configs", "catalog", "stats", "intervals", "simulation", "workload",
            "summaries", "findings", "calibration", "comparisons", "variance", "replay_cost",
            "machine_level")
# Reading and showing recorded runs: no measuring code either.
RECORDS = ("records", "verify_memo", "book_cache", "show", "tables", "plots")
FORBIDDEN = ("torch", "triton", f"{PACKAGE}.sweep", f"{PACKAGE}.candidates")


def _module_file(module: str) -> Path | None:
    """The source file of a package module (``attn_analysis.x``), or None outside it."""
    parts = module.split(".")
    if parts[0] != PACKAGE:
        return None
    path = ROOT.joinpath(*parts[1:])
    if path.with_suffix(".py").is_file():
        return path.with_suffix(".py")
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    return None


def imports_of(module: str) -> set[str]:
    """Every module that ``module``'s source imports, anywhere in it, as absolute names."""
    path = _module_file(module)
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module
            found.add(prefix)
            # ``from . import x`` and ``from .mod import name`` may name a submodule
            for alias in node.names:
                if _module_file(f"{prefix}.{alias.name}") is not None:
                    found.add(f"{prefix}.{alias.name}")
    return found


def reach(module: str) -> dict[str, list[str]]:
    """Every module ``module`` reaches, each with one import chain that gets there."""
    chains = {module: [module]}
    todo = [module]
    while todo:
        current = todo.pop()
        for name in sorted(imports_of(current)):
            if name in chains:
                continue
            chains[name] = chains[current] + [name]
            if _module_file(name) is not None:
                todo.append(name)
    return chains


def _violations(module: str) -> list[str]:
    return [" -> ".join(chain) for name, chain in sorted(reach(module).items())
            if any(name == f or name.startswith(f + ".") for f in FORBIDDEN)]


@pytest.mark.parametrize("name", ANALYSIS + RECORDS)
def test_analysis_and_records_reach_neither_torch_nor_the_measuring_modules(name):
    assert _violations(f"{PACKAGE}.{name}") == []


def test_the_walk_sees_lazy_imports_and_follows_the_package():
    # sweep imports candidates inside functions only; the walk must still find torch
    assert f"{PACKAGE}.candidates" in imports_of(f"{PACKAGE}.sweep")
    assert any("torch" in v for v in _violations(f"{PACKAGE}.sweep"))
    # and it follows the package: ceilings imports torch itself and timing lazily
    assert "torch" in reach(f"{PACKAGE}.ceilings")
    assert reach(f"{PACKAGE}.calibration")[f"{PACKAGE}.stats"][-1] == f"{PACKAGE}.stats"
