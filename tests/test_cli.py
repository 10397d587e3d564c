"""Every command refuses an abbreviated option instead of guessing what it stands for.

argparse's default matches any unambiguous prefix: a typo such as ``--famil 3`` became
``--family-cap 3``, and an option added later could silently change what an old command line
meant. The trainer's HfArgumentParser has refused prefixes since the config checks; every other
parser (and sub-parser) of the project says ``allow_abbrev=False``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from lake.session import job_arguments
from tests.test_layers import REPO

FOLDERS = (
    "lake",
    "retrieval",
    "spark_jobs",
    "trainer",
    "evaluation",
    "expectations",
    "dags",
    "benchmarks",
)


def parsers_guessing_prefixes(root: Path, folders=FOLDERS) -> list[str]:
    """``path:line`` of every ArgumentParser / add_parser call without allow_abbrev=False."""
    found = []
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.Call):
                    continue
                name = getattr(node.func, "attr", getattr(node.func, "id", ""))
                if name not in ("ArgumentParser", "add_parser"):
                    continue
                said = {k.arg: k.value for k in node.keywords}
                off = said.get("allow_abbrev")
                if not (isinstance(off, ast.Constant) and off.value is False):
                    found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_no_parser_of_the_project_matches_option_prefixes():
    assert not parsers_guessing_prefixes(REPO), parsers_guessing_prefixes(REPO)


def test_the_check_finds_a_parser_that_guesses(tmp_path):
    (tmp_path / "lake").mkdir()
    (tmp_path / "lake" / "x.py").write_text(
        "import argparse\n"
        "p = argparse.ArgumentParser(description='d', allow_abbrev=False)\n"
        "s = p.add_subparsers()\n"
        "s.add_parser('go', help='h')\n"
        "q = argparse.ArgumentParser(allow_abbrev=True)\n"
    )
    assert parsers_guessing_prefixes(tmp_path, ("lake",)) == ["lake/x.py:4", "lake/x.py:5"]


def test_a_job_refuses_an_abbreviated_option_and_takes_the_full_one(capsys):
    parser = job_arguments("a job")
    assert parser.parse_args(["--lake", "/l", "--run-id", "r1"]).run_id == "r1"
    with pytest.raises(SystemExit) as stop:
        parser.parse_args(["--lake", "/l", "--run", "r1"])
    assert stop.value.code == 2
    assert "unrecognized arguments: --run r1" in capsys.readouterr().err


def test_a_failing_job_keeps_its_one_line_when_its_trace_cannot_be_saved(tmp_path, capsys):
    """An unwritable log folder (a read-only home, XEMBED_LOG_DIR under a file) made the error
    handler fail too: two tracebacks instead of the one line."""
    import os

    from lake.cli import run_job

    blocker = tmp_path / "a-file"
    blocker.write_text("")

    def main():
        raise FileNotFoundError("table silver/patents does not exist")

    os.environ["XEMBED_LOG_DIR"] = str(blocker / "logs")
    try:
        assert run_job("curate", main) == 1
    finally:
        del os.environ["XEMBED_LOG_DIR"]
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        "curate: table silver/patents does not exist (trace not saved: "
    )


def test_the_class_archive_option_survives_a_blank_in_its_path(tmp_path, monkeypatch):
    """Spark's launcher splits SPARK_SUBMIT_OPTS at blanks: a cache under "/home/Jane Doe"
    made every JVM fail ("Could not find or load main class cache.cds...")."""
    import shlex

    from lake import jvm

    archive = tmp_path / "my cache" / "spark-x.jsa"
    archive.parent.mkdir()
    archive.write_bytes(b"")
    monkeypatch.setattr(jvm, "archive_path", lambda: archive)
    assert f"-XX:SharedArchiveFile={archive}" in shlex.split(jvm.cds_options())
