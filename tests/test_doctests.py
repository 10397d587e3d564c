"""The examples in the project's docstrings run and hold (`>>>` lines are tests too)."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("lake", "spark_jobs", "retrieval", "trainer", "evaluation", "expectations", "schemas")


def _modules_with_examples() -> list[str]:
    found = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            if ">>> " in path.read_text(encoding="utf-8"):
                relative = path.relative_to(REPO).with_suffix("")
                found.append(".".join(relative.parts).removesuffix(".__init__"))
    return found


MODULES = _modules_with_examples()


def test_the_docstring_examples_are_found():
    # the modules known to hold examples; a rename that loses them fails here, not silently
    assert {"lake.cli", "spark_jobs.lib.texts", "spark_jobs.lib.claims"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name}: no example ran"
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples failed"
