"""Fault suite: a run killed between its table commits is invisible to every later job, a
rerun repairs, and a mixed lake is refused (README: Reliability)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import pytest
from delta.tables import DeltaTable as SparkDeltaTable
from deltalake import DeltaTable
from pyspark.sql import functions as F

from lake import MixedLakeError, jvm
from spark_jobs import curate, ingest, split, sql
from spark_jobs.lib.sample.generate import generate
from tests.conftest import copy_lake

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.spark, pytest.mark.faults]


def _commits(lake: str, name: str) -> int:
    return len(list(Path(lake, name, "_delta_log").glob("*.json")))


def _last_run(spark, lake: str, job: str):
    runs = spark.read.format("delta").load(f"{lake}/meta/job_runs").where(f"job = '{job}'")
    return runs.orderBy(F.desc("finished_at")).first()


def _kill_after_first_commit(lake: str, source: str, table: str, scratch: Path) -> None:
    """Run ingest as its own process group and SIGKILL it as soon as ``table`` commits.

    A killed JVM runs no shutdown hook: its local and temporary files go to ``scratch`` (the
    test's folder), not to /tmp where nothing would remove them."""
    before = _commits(lake, table)
    scratch.mkdir()
    env = jvm.scratch_env({**os.environ, "XEMBED_SPARK_MASTER": "local[1]"}, scratch)
    process = subprocess.Popen(
        [sys.executable, "spark_jobs/ingest.py", "--lake", lake, "--input", source],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )
    deadline = time.monotonic() + 600
    while _commits(lake, table) == before:
        assert process.poll() is None, "ingest ended before it committed"
        assert time.monotonic() < deadline, "ingest never committed"
        time.sleep(0.02)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    assert any(scratch.glob("blockmgr-*"))  # what the killed JVM left is the test's to remove


def test_a_run_killed_between_commits_is_invisible_and_a_rerun_repairs(
    spark, pipeline, tmp_path, capsys
):
    lake = copy_lake(pipeline, tmp_path)
    good = _last_run(spark, lake, "ingest")
    other = str(tmp_path / "other")
    generate(spark, other, n_patents=120, seed=29, bad_share=0.0)

    _kill_after_first_commit(lake, other, "bronze/publications", tmp_path / "scratch")
    # the premise: new publications beside the old citations, and no run row for the kill
    assert DeltaTable(f"{lake}/bronze/publications").version() > good.outputs["bronze/publications"]
    assert DeltaTable(f"{lake}/bronze/citations").version() == good.outputs["bronze/citations"]
    assert _last_run(spark, lake, "ingest").run_id == good.run_id

    # `make sql` shows what the jobs read: the killed run's publications are not in its view
    versions = sql.published_versions(spark, lake)
    assert versions["bronze/publications"] == good.outputs["bronze/publications"]
    assert "bronze_publications shows version" in capsys.readouterr().err
    view = next(
        line
        for line in sql.init_sql(lake, versions).splitlines()
        if " bronze_publications " in line
    )
    spark.sql(view.rstrip(";"))
    shown = spark.sql("SELECT publication_number FROM bronze_publications").toPandas()
    old = DeltaTable(f"{lake}/bronze/publications", version=good.outputs["bronze/publications"])
    assert sorted(shown.publication_number) == sorted(old.to_pandas().publication_number)

    curate.run(spark, lake)  # reads the publications of the last successful ingest
    assert _last_run(spark, lake, "curate").inputs == {
        "bronze/publications": good.outputs["bronze/publications"]
    }
    patents = DeltaTable(f"{lake}/silver/patents").to_pandas()
    assert set(patents.publication_number) <= set(old.to_pandas().publication_number)
    split.run(spark, lake, date(2025, 1, 1))  # ... and split the citations of that same run
    assert (
        _last_run(spark, lake, "split").inputs["bronze/citations"]
        == (good.outputs["bronze/citations"])
    )

    rerun = ingest.run(spark, lake, other, "google_patents")  # the rerun repairs
    assert rerun["records_kept"] > 0
    repaired = _last_run(spark, lake, "ingest")
    curate.run(spark, lake)
    split.run(spark, lake, date(2025, 1, 1))
    assert (
        _last_run(spark, lake, "split").inputs["bronze/citations"]
        == (repaired.outputs["bronze/citations"])
    )


def test_a_mixed_lake_is_refused_with_a_clear_message(spark, pipeline, tmp_path):
    lake = copy_lake(pipeline, tmp_path)
    first = _last_run(spark, lake, "ingest")
    other = str(tmp_path / "other")
    generate(spark, other, n_patents=80, seed=31, bad_share=0.0)
    ingest.run(spark, lake, other, "google_patents")
    # an operator puts the old citations back by hand: new publications, old citations
    SparkDeltaTable.forPath(spark, f"{lake}/bronze/citations").restoreToVersion(
        int(first.outputs["bronze/citations"])
    )
    with pytest.raises(MixedLakeError, match=r"mixed lake: .*bronze/citations.*rerun ingest"):
        split.run(spark, lake, date(2025, 1, 1))
    assert _last_run(spark, lake, "split").status == "failed"


def test_an_upstream_rerun_without_the_jobs_after_it_is_refused(spark, pipeline, tmp_path):
    """New bronze beside silver curated from the old one: split refuses until curate reruns."""
    lake = copy_lake(pipeline, tmp_path)
    other = str(tmp_path / "other")
    generate(spark, other, n_patents=80, seed=37, bad_share=0.0)
    ingest.run(spark, lake, other, "google_patents")
    with pytest.raises(MixedLakeError, match=r"mixed lake: .*bronze/citations.*rerun ingest"):
        split.run(spark, lake, date(2025, 1, 1))
    curate.run(spark, lake)
    split.run(spark, lake, date(2025, 1, 1))


def test_a_recipes_pairs_built_before_curate_ran_again_are_refused_at_export(
    spark, pipeline, tmp_path
):
    """gold/stage1_pairs holds one partition per recipe, each replaced by its own build_pairs
    run. The read lineage follows the run that wrote the table's last version: xembed's pairs,
    built from the views of an earlier curate, were exported beside r3's fresh ones."""
    from spark_jobs import build_pairs, export_training

    lake = copy_lake(pipeline, tmp_path)
    build_pairs.run(spark, lake)  # xembed
    curate.run(spark, lake)  # the same bronze again: new versions of every silver table
    split.run(spark, lake, date(2025, 1, 1))
    build_pairs.run(spark, lake, recipe="r3")  # the table's last version: fresh
    export = ("stage1", "parquet", str(tmp_path / "shards"))
    export_training.run(spark, lake, *export, recipe="r3")
    with pytest.raises(
        MixedLakeError,
        match=r"the 'xembed' pairs of gold/stage1_pairs were built by build_pairs run "
        r"build_pairs-\S+ from .*silver/views v\d+ \(the lake's: v\d+\); rebuild them so they "
        r"match the lake: build_pairs.py --recipe xembed",
    ):
        export_training.run(spark, lake, *export, recipe="xembed")
    # a matched control counted the stale partition's pairs the same way
    with pytest.raises(MixedLakeError, match=r"the 'xembed' pairs of gold/stage1_pairs were"):
        build_pairs.run(spark, lake, recipe="r3", match_volume_of="xembed")
    build_pairs.run(spark, lake)
    export_training.run(spark, lake, *export, recipe="xembed")


def test_concurrent_ingests_end_consistent_or_refused_never_mixed(spark, tmp_path):
    """Two ingests of different inputs into one lake at once: Delta serialises each commit;
    what curate then reads is one run's tables, or it refuses the mix and names the job."""
    lake = str(tmp_path / "lake")
    inputs = [str(tmp_path / name) for name in ("a", "b")]
    for seed, folder in zip((41, 43), inputs, strict=True):
        generate(spark, folder, n_patents=60, seed=seed, bad_share=0.0)
    processes = [
        subprocess.Popen(
            [sys.executable, "spark_jobs/ingest.py", "--lake", lake, "--input", folder],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "XEMBED_SPARK_MASTER": "local[1]"},
        )
        for folder in inputs
    ]
    errors = [p.communicate(timeout=900)[1] for p in processes]
    codes = [p.returncode for p in processes]
    # A conflicting commit is retried (lake.tables.write_table), so both normally succeed;
    # never may both fail.
    assert 0 in codes, "\n".join(e[-3000:] for e in errors)
    succeeded = {
        r["run_id"]: r
        for r in spark.read.format("delta").load(f"{lake}/meta/job_runs").collect()
        if r["status"] == "succeeded"
    }
    assert len(succeeded) == codes.count(0)
    try:
        curate.run(spark, lake)
        split.run(spark, lake, date(2025, 1, 1))  # citations must come from the same run
    except MixedLakeError as error:
        assert "rerun ingest" in str(error)
        return
    publications = _last_run(spark, lake, "curate").inputs["bronze/publications"]
    citations = _last_run(spark, lake, "split").inputs["bronze/citations"]
    assert any(
        run["outputs"]["bronze/publications"] == publications
        and run["outputs"]["bronze/citations"] == citations
        for run in succeeded.values()
    )
