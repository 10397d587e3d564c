"""Shared fixtures: one local Spark session with Delta for the whole run."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from lake import jvm

os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
# Airflow imported by the tests must not touch ~/airflow.
if "AIRFLOW_HOME" not in os.environ:  # xdist workers inherit the controller's, removed at its exit
    os.environ["AIRFLOW_HOME"] = tempfile.mkdtemp(prefix="xembed-tests-airflow-")
    atexit.register(shutil.rmtree, os.environ["AIRFLOW_HOME"], ignore_errors=True)
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
# One OpenMP thread per process (torch, faiss, OpenBLAS), this process and every one it
# starts: under `make test` both cores are always busy (two workers, each with its Spark
# driver, the DAG run's server and task processes), and a second OpenMP thread only contends,
# its spin-waits taking CPU from the other processes. The same working tree, one sitting:
# 1,133 s and 1,173 s of pytest without, 1,021 s with (the end-to-end DAG test 724 / 763 s
# against 558 s). `make demo` runs one task at a time and keeps torch's default.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# The suite's short-lived Spark drivers (its spark-submits) run on tiny data: C1-only
# JIT with a full-size code cache and the class-data-sharing archive of `make setup` (see the
# Makefile and lake/jvm.py).
if "SPARK_SUBMIT_OPTS" not in os.environ:  # make test sets it; direct pytest runs get the same
    os.environ["SPARK_SUBMIT_OPTS"] = jvm.local_options()


# The tests on the session's generated lake (the `pipeline` fixture, and `stage2` on it) run in
# one xdist group: each worker that ran one of them built its own copy of the lake (generate ->
# ingest -> curate -> split -> the Stage II chain, ~170 s of the two cores each).
END_TO_END, LAKE_GROUP = "airflow_end_to_end", "session_lake"


def _name(marker) -> str:
    return str(marker.args[0] if marker.args else marker.kwargs.get("name", "default"))


def _group(item) -> str | None:
    marker = item.get_closest_marker("xdist_group")
    return None if marker is None else _name(marker)


@pytest.hookimpl(tryfirst=True)  # before xdist's hook turns the group markers into node ids
def pytest_collection_modifyitems(config, items):
    """The Airflow end-to-end run (by far the longest) first, the session-lake group second,
    the other groups, then the rest: `make test` (`--no-loadscope-reorder`) hands them out in
    this order, so one worker starts the end-to-end run at once and the other the lake group."""
    for item in items:
        if "pipeline" not in item.fixturenames:
            continue
        groups = {_name(marker) for marker in item.iter_markers("xdist_group")}
        if groups - {LAKE_GROUP}:
            # pytest-xdist joins the names of all of a test's groups into one new group, which
            # would build the session lake in a second worker
            raise pytest.UsageError(
                f"{item.nodeid} uses the session lake (`pipeline`): it may join no xdist group "
                f"but {LAKE_GROUP!r}, found {sorted(groups)}; mark its module's other tests "
                "one by one instead"
            )
        item.add_marker(pytest.mark.xdist_group(LAKE_GROUP))
    rank = {END_TO_END: 0, LAKE_GROUP: 1, None: 3}
    items.sort(key=lambda item: rank.get(_group(item), 2))


@pytest.hookimpl(optionalhook=True)  # an xdist hook: `-p no:xdist` runs do not define it
def pytest_xdist_node_collection_finished(node, ids):
    """Stop a `--dist loadgroup` run whose groups do not reach the scheduler: under pytest 9.2
    pytest-xdist 3.8 drops them without a word (pytest-xdist#1386), and every worker then
    rebuilds the session lake. The end-to-end test is always grouped: its id must carry it."""
    if node.config.getoption("dist") != "loadgroup":
        return
    ungrouped = [i for i in ids if i.endswith("::test_airflow_dags_test_runs_the_whole_pipeline")]
    if ungrouped:
        pytest.exit(
            f"--dist loadgroup: {ungrouped[0]} arrived without its xdist_group "
            f"(@{END_TO_END}): this pytest-xdist does not support this pytest; "
            "`make setup` installs the pair constraints.txt pins",
            returncode=pytest.ExitCode.USAGE_ERROR,
        )


@pytest.fixture(scope="session")
def spark():
    from lake import build_session

    # This driver serves a whole worker's tests (an hour of queries): unlike the short-lived
    # spark-submits above it keeps the tiered JIT, whose C2 code runs the repeated planning and
    # execution about twice as fast once warm (build_triplets on the demo lake, third run in
    # one JVM: 80 s C1-only, 39 s tiered).
    submit_opts = os.environ["SPARK_SUBMIT_OPTS"]
    os.environ["SPARK_SUBMIT_OPTS"] = jvm.long_lived_options(submit_opts)
    try:
        session = build_session(
            "xembed-tests",
            "local[2]",
            conf={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"},
        )
    finally:
        os.environ["SPARK_SUBMIT_OPTS"] = submit_opts
    yield session
    session.stop()


@pytest.fixture
def lake(tmp_path):
    return str(tmp_path / "lake")


@pytest.fixture(scope="session")
def pipeline(spark, tmp_path_factory):
    """generate 300 patents -> ingest -> curate -> split: (manifest, metrics, lake, sample)."""
    from datetime import date

    from spark_jobs import curate, ingest, split
    from spark_jobs.lib.sample.generate import generate

    root = tmp_path_factory.mktemp("pipeline")
    sample, lake = str(root / "sample"), str(root / "lake")
    manifest = generate(spark, sample, n_patents=300, seed=13, bad_share=0.05)
    metrics = {
        "ingest": ingest.run(spark, lake, sample, "google_patents"),
        "curate": curate.run(spark, lake),
        "split": split.run(spark, lake, date(2025, 1, 1)),
    }
    return manifest, metrics, lake, sample


@pytest.fixture(scope="session")
def stage2(spark, pipeline, tmp_path_factory):
    """The Stage II chain on the pipeline lake with the untrained tiny Qwen3 as mining encoder."""
    from evaluation import encode, index
    from spark_jobs import build_triplets, mine_candidates, prepare_retrieval

    _, _, lake, _ = pipeline
    retrieval = str(tmp_path_factory.mktemp("retrieval"))
    prepare_retrieval.run(spark, lake, retrieval)
    for kind, source, key in (("tac", "candidates", "id"), ("query", "queries", "key")):
        encode.main(
            [
                "--model",
                "builtin:qwen3-tiny",
                "--input",
                f"{retrieval}/{source}",
                "--id-column",
                key,
                "--lang-column",
                "lang",
                "--lake",
                lake,
                "--encoder-name",
                "miner",
                "--kind",
                kind,
                "--batch-size",
                "64",
            ]
        )
    index.main(["bm25", "--collections", f"{retrieval}/bm25", "--out", f"{retrieval}/bm25_index"])
    index.main(["faiss", "--lake", lake, "--encoder", "miner", "--out", f"{retrieval}/faiss"])
    mined = mine_candidates.run(spark, lake, retrieval, "miner", k=120)
    built = build_triplets.run(spark, lake, seed=13, validation_size=40)
    return lake, retrieval, mined, built


def copy_lake(pipeline, tmp_path) -> str:
    """A private copy of the session's pipeline lake, for tests that write to it (a rerun
    there would change the lineage every later test's jobs check)."""
    _, _, lake, _ = pipeline
    return private_copy(lake, tmp_path)


def private_copy(lake: str, tmp_path, name: str = "lake") -> str:
    """A copy of a lake a module's tests share, for one test to write to."""
    import shutil

    copy = tmp_path / name
    shutil.copytree(lake, copy)
    return str(copy)


def sliced_minilm(out: Path, layers: int = 1) -> str:
    """all-MiniLM-L6-v2 cut to its first ``layers`` of six transformer layers: the same
    vocabulary, embeddings, pooling and files, a sixth of the compute per token at one layer.
    A BERT-style PHAGE base for tests of the DAG's wiring, which check what the tasks write,
    not how well the model retrieves (the PHAGE tests train the whole model)."""
    from safetensors.torch import load_file, save_file

    from trainer.models import resolve

    source = Path(resolve("builtin:minilm"))
    shutil.copytree(source, out, ignore=shutil.ignore_patterns("model.safetensors", "README.md"))
    config = json.loads((source / "config.json").read_text())
    config["num_hidden_layers"] = layers
    (out / "config.json").write_text(json.dumps(config, indent=2))
    kept = {
        name: weights
        for name, weights in load_file(str(source / "model.safetensors")).items()
        if not name.startswith("encoder.layer.") or int(name.split(".")[2]) < layers
    }
    save_file(kept, str(out / "model.safetensors"), metadata={"format": "pt"})
    return str(out)


def lines_frame(spark, records, source_file="test.jsonl"):
    """A read_lines()-shaped DataFrame from JSON strings or dicts."""
    rows = [
        (r if isinstance(r, str) else json.dumps(r, ensure_ascii=False), source_file)
        for r in records
    ]
    return spark.createDataFrame(rows, "value string, source_file string")


def gp_record(
    number="US-1-A1",
    family="100",
    lang="en",
    abstract="An abstract.",
    claims="1. A thing.",
    filed=20200101,
    published=20210101,
    **extra,
):
    """A minimal valid Google Patents export record."""
    record = {
        "publication_number": number,
        "family_id": family,
        "country_code": number[:2],
        "kind_code": number.rsplit("-", 1)[-1],
        "application_number": f"{number[:2]}-APP-A",
        "publication_date": published,
        "filing_date": filed,
        "priority_date": filed,
        "title_localized": [{"text": "A title", "language": lang, "truncated": False}],
        "abstract_localized": [{"text": abstract, "language": lang, "truncated": False}],
        "claims_localized": [{"text": claims, "language": lang, "truncated": False}],
        "description_localized": [{"text": "A description.", "language": lang, "truncated": False}],
        "ipc": [{"code": "H01M10/05", "inventive": True, "first": True}],
        "cpc": [],
        "citation": [],
    }
    record.update(extra)
    return record


def views_frame(spark, rows):
    """A silver/views DataFrame from (publication_number, family_id, lang, view, text[,
    n_chars]) rows: text_sha256 (and n_chars when absent) computed as curate computes them."""
    import hashlib

    from schemas import table

    full = [
        (*r[:5], r[5] if len(r) > 5 else len(r[4]), hashlib.sha256(r[4].encode()).hexdigest())
        for r in rows
    ]
    return spark.createDataFrame(full, table("silver/views").spark_schema())
