"""The import graph of the project's packages is layered, acyclic and explicit (README: Layout).

    schemas -> lake, retrieval -> spark_jobs, trainer -> evaluation -> expectations -> dags

A package may import only the packages listed for it below. Imports of project modules
inside functions are allowed only where a heavy optional dependency is deferred on purpose,
said in a comment containing "deferred" on the import or the line above it.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("schemas", "lake", "retrieval", "spark_jobs", "trainer", "evaluation", "expectations")
ALLOWED = {
    "schemas": {"schemas"},
    "lake": {"schemas", "lake"},
    "retrieval": {"schemas", "retrieval"},
    "spark_jobs": {"schemas", "lake", "retrieval", "spark_jobs"},
    "trainer": {"schemas", "lake", "trainer"},
    "evaluation": {"schemas", "lake", "retrieval", "trainer", "evaluation"},
    "expectations": {"schemas", "lake", "spark_jobs", "expectations"},
    "dags": {"schemas"},  # the DAG runs commands; parsing it must stay cheap
}


def module_name(root: Path, path: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_imports(path: Path) -> list[tuple[str, int, bool]]:
    """(imported project module, line, inside a function) for every import in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for child in ast.walk(node):
                if isinstance(child, ast.Import | ast.ImportFrom):
                    inside.add(id(child))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if name.split(".")[0] in ALLOWED:
                found.append((name, node.lineno, id(node) in inside))
    return found


def sources(root: Path, package: str) -> list[Path]:
    return sorted((root / package).rglob("*.py"))


def layer_violations(root: Path) -> list[str]:
    return [
        f"{path.relative_to(root)}:{line} imports {name}"
        for package in ALLOWED
        for path in sources(root, package)
        for name, line, _ in project_imports(path)
        if name.split(".")[0] not in ALLOWED[package]
    ]


def nested_violations(root: Path) -> list[str]:
    out = []
    for package in ALLOWED:
        for path in sources(root, package):
            lines = path.read_text(encoding="utf-8").splitlines()
            for name, line, nested in project_imports(path):
                said = " ".join(lines[max(0, line - 2) : line]).lower()
                if nested and "deferred" not in said:
                    out.append(f"{path.relative_to(root)}:{line} imports {name}")
    return sorted(set(out))


def cycle(root: Path) -> list[str]:
    """One import cycle among the modules' top-level imports, or []."""
    modules = {module_name(root, p): p for package in ALLOWED for p in sources(root, package)}
    graph = {
        mod: {
            target
            for name, _, nested in project_imports(path)
            if not nested
            for target in (name, name.rsplit(".", 1)[0])
            if target in modules and target != mod and not mod.startswith(target + ".")
        }
        for mod, path in modules.items()
    }  # a package's __init__ importing its own submodules is not a cycle of behaviour
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> list[str]:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*trail, node, nxt]
            if nxt not in state and (found := visit(nxt, [*trail, node])):
                return found
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state and (found := visit(node, [])):
            return found
    return []


def test_packages_import_only_the_layers_below_them():
    assert not layer_violations(REPO), "\n".join(layer_violations(REPO))


def test_trainer_and_spark_jobs_never_import_each_other():
    for package, other in (("trainer", "spark_jobs"), ("spark_jobs", "trainer")):
        for path in sources(REPO, package):
            assert not [n for n, _, _ in project_imports(path) if n.split(".")[0] == other], path


def test_no_function_level_project_import_unless_deferred_on_purpose():
    assert not nested_violations(REPO), "\n".join(nested_violations(REPO))


def test_the_module_graph_has_no_cycle():
    assert not cycle(REPO), " -> ".join(cycle(REPO))


def test_the_checks_report_planted_violations(tmp_path):
    """The checks are not vacuous: an upward import, a hidden import and a cycle are found."""
    for package in ("trainer", "spark_jobs"):
        (tmp_path / package).mkdir()
    (tmp_path / "trainer" / "bad.py").write_text("def f():\n    from spark_jobs import ingest\n")
    (tmp_path / "spark_jobs" / "a.py").write_text("import spark_jobs.b\n")
    (tmp_path / "spark_jobs" / "b.py").write_text("from spark_jobs import a\n")
    assert "trainer/bad.py:2 imports spark_jobs" in layer_violations(tmp_path)
    assert "trainer/bad.py:2 imports spark_jobs" in nested_violations(tmp_path)
    assert cycle(tmp_path) == ["spark_jobs.a", "spark_jobs.b", "spark_jobs.a"]


def test_the_commands_run_from_a_folder_holding_folders_named_like_the_packages(tmp_path):
    """`python -m` puts the working directory first on sys.path. Under setuptools' import-hook
    editable install a `lake/` folder there (`--lake lake`, a user's work folder) became an
    empty namespace package ahead of the installed one, and every command failed at import:
    `cannot import name 'build_session' from 'lake' (unknown location)`. The install now puts
    the project root on sys.path, where a regular package wins over a namespace portion."""
    for package in PACKAGES:
        (tmp_path / package).mkdir()
    probe = "; ".join(f"import {p}; assert {p}.__file__, {p}.__path__" for p in PACKAGES)
    for argv in (["-c", probe], ["-m", "evaluation.index", "--help"]):
        done = subprocess.run(
            [sys.executable, *argv], cwd=tmp_path, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, f"{argv}: {done.stderr[-2000:]}"


def test_the_install_and_the_cluster_zip_ship_the_packages_checked_here():
    """pyproject's package list is what `pip install` and `make dist` (the `--py-files` zip for
    a cluster's executors) ship; a package missing there imports locally from the checkout and
    fails only on a cluster."""
    found = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    assert [p.removesuffix("*") for p in found["find"]["include"]] == list(PACKAGES)
    on_disk = {p.parent.name for p in REPO.glob("*/__init__.py")} - {"tests"}
    assert on_disk == set(PACKAGES)
