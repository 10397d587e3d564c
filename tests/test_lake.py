"""Table contracts and the Delta writer: schema enforcement, idempotent overwrite, run log."""

import pytest
from deltalake import DeltaTable

from lake import JobRun, read_table, write_table
from lake.tables import commit_info
from schemas import TABLES, table

pytestmark = pytest.mark.spark


def test_every_contract_builds_a_spark_schema():
    for spec in TABLES.values():
        assert spec.spark_schema().fieldNames() == spec.column_names
        assert set(spec.keys) <= set(spec.column_names) and set(spec.partition_by) <= set(
            spec.column_names
        )


def families(spark, rows):
    return spark.createDataFrame(rows, table("silver/families").spark_schema())


ROW = ("F1", ["A-1"], ["US"], ["en"], 1, None, None)


def test_write_rejects_frames_that_break_the_contract(spark, lake):
    frame = families(spark, [ROW]).drop("n_members")
    with pytest.raises(ValueError, match=r"silver/families.*missing \['n_members'\]"):
        write_table(spark, frame, lake, "silver/families")
    with pytest.raises(ValueError, match=r"unexpected \['extra'\]"):
        write_table(
            spark,
            families(spark, [ROW]).selectExpr("*", "family_id AS extra"),
            lake,
            "silver/families",
        )


def test_casts_that_would_change_values_without_an_error_are_refused(spark, lake):
    """The contract's cast took struct fields by position (a title given as {language, text}
    stored its language as the text) and truncated 12.9 to 12."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, DoubleType, IntegerType, StringType, StructType

    from lake.tables import _lossy_cast

    with pytest.raises(ValueError, match=r"n_members is double \(a cast would truncate it\)"):
        frame = families(spark, [ROW]).withColumn("n_members", F.col("n_members") + 0.9)
        write_table(spark, frame, lake, "silver/families")
    swapped = ArrayType(StructType().add("language", StringType()).add("text", StringType()))
    ordered = ArrayType(StructType().add("text", StringType()).add("language", StringType()))
    assert "title_localized[] has the struct fields ['language', 'text']" in _lossy_cast(
        swapped, ordered, "title_localized"
    )
    assert _lossy_cast(ordered, ordered, "t") is None
    assert _lossy_cast(IntegerType(), DoubleType(), "n") is None  # widening is fine
    assert "is array<" in _lossy_cast(ordered, StringType(), "t")


def test_not_null_columns_are_enforced_by_delta(spark, lake):
    bad = spark.createDataFrame(
        [(None, ["A-1"], None, None, 1, None, None)],
        "family_id string, members array<string>, countries array<string>, "
        "languages array<string>, n_members int, earliest_filing_date date, "
        "earliest_publication_date date",
    )
    with pytest.raises(Exception, match=r"(?i)null|invariant"):
        write_table(spark, bad, lake, "silver/families")


def test_rewrite_replaces_rows_and_is_a_real_delta_table(spark, lake):
    v1 = write_table(spark, families(spark, [ROW]), lake, "silver/families")
    v2 = write_table(spark, families(spark, [ROW]), lake, "silver/families")
    assert v2 == v1 + 1
    dt = DeltaTable(f"{lake}/silver/families")
    assert dt.version() == v2 and len(dt.to_pandas()) == 1


def test_files_record_their_row_count_and_no_column_statistics(spark, lake):
    """Delta's min/max statistics per file cost as much as the write itself (3-6x with the
    short-job JVM options) and would skip nothing for our readers; the tables are created
    without them, and a rewrite keeps that."""
    import json
    from pathlib import Path

    write_table(spark, families(spark, [ROW]), lake, "silver/families")
    version = write_table(spark, families(spark, [ROW, ("F2", *ROW[1:])]), lake, "silver/families")
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{lake}/silver/families`").first()
    assert detail["properties"]["delta.dataSkippingNumIndexedCols"] == "0"
    log = Path(lake, "silver/families/_delta_log", f"{version:020d}.json").read_text()
    adds = [json.loads(line)["add"] for line in log.splitlines() if '"add"' in line]
    stats = [json.loads(add["stats"]) for add in adds]
    assert sum(s["numRecords"] for s in stats) == 2
    assert not [s for s in stats if "minValues" in s or "maxValues" in s], stats


def test_a_relative_lake_is_the_one_under_the_working_directory(spark, tmp_path, monkeypatch):
    """The README's `--lake data/lake` failed every job at its first write: Delta reads a
    relative location in SQL (delta.`data/lake/...`) as a table of a schema named `delta`."""
    from lake import job_arguments, path_or_uri

    monkeypatch.chdir(tmp_path)
    lake = job_arguments("a job").parse_args(["--lake", "data/lake"]).lake
    assert lake == str(tmp_path / "data" / "lake")
    write_table(spark, families(spark, [ROW]), lake, "silver/families")
    assert len(DeltaTable(str(tmp_path / "data/lake/silver/families")).to_pandas()) == 1
    for uri in ("s3a://bucket/lake", "file:/srv/lake", "file:///srv/lake", "hdfs://nn/lake"):
        assert path_or_uri(uri) == uri  # URIs are Spark's to resolve
    with pytest.raises(SystemExit):
        job_arguments("a job").parse_args(["--lake", " "])


def test_job_run_records_versions_and_counters(spark, lake):
    write_table(spark, families(spark, [ROW]), lake, "silver/families")
    with JobRun(spark, lake, "unit", {"a": 1}, run_id="r1") as job:
        frame = job.read("silver/families")
        job.write(frame, "silver/families")
        job.count("rows", frame.count())
    log = DeltaTable(f"{lake}/meta/job_runs").to_pandas()
    row = log[log.run_id == "r1"].iloc[0]
    assert row.status == "succeeded" and dict(row.metrics) == {"rows": 1}
    assert dict(row.inputs) == {"silver/families": 1} and dict(row.outputs) == {
        "silver/families": 2
    }


def test_a_run_knows_the_rows_it_wrote_from_its_commit_or_by_counting(spark, lake):
    from datetime import UTC, datetime

    def rejected(n: int):
        rows = [
            {"reason": "bad", "record_id": f"x{i}", "record": "{}", "source_file": "f"}
            for i in range(n)
        ]
        frame = spark.createDataFrame(
            rows, "reason string, record_id string, record string, source_file string"
        )
        return frame.selectExpr(
            "*", f"timestamp'{datetime.now(UTC):%Y-%m-%d %H:%M:%S}' AS ingested_at"
        )

    with JobRun(spark, lake, "unit", run_id="r3") as job:
        job.write_quarantine(rejected(3))
        assert job.written("quarantine") == 3  # the commit's numOutputRows
        job.write_quarantine(rejected(0))  # an empty partition: Delta commits nothing
        assert job.written("quarantine") == 0
        metrics = "spark.databricks.delta.history.metricsEnabled"
        spark.conf.set(metrics, "false")
        try:
            job.write_quarantine(rejected(2))  # no metrics in the commit: counted
        finally:
            spark.conf.unset(metrics)
        assert job.written("quarantine") == 2
        last = commit_info(spark, f"{lake}/quarantine", job.outputs["quarantine"])
        assert "numOutputRows" not in last.get("operationMetrics", {})  # it was counted
    stored = DeltaTable(f"{lake}/quarantine").to_pandas()
    assert sorted(stored.record_id) == ["x0", "x1"] and set(stored.stage) == {"unit"}


def test_a_failed_runs_partition_is_not_published_by_the_next_partition_replace(spark, lake):
    """A Delta version is the whole table and readers hide only a failed run's own commits:
    a later successful partition replace (curate's quarantine) carried the failed ingest's
    partition forward, publishing its rows and hiding the good ingest's."""
    from datetime import UTC, datetime

    from lake.snapshots import succeeded_runs, visible

    def rejected(*ids):
        frame = spark.createDataFrame(
            [("bad", i, "{}", "f") for i in ids],
            "reason string, record_id string, record string, source_file string",
        )
        return frame.selectExpr(
            "*", f"timestamp'{datetime.now(UTC):%Y-%m-%d %H:%M:%S}' AS ingested_at"
        )

    def published():
        snapshot = visible(spark, lake, "quarantine", succeeded_runs(spark, lake))
        rows = read_table(spark, lake, "quarantine", snapshot.version).collect()
        return sorted((r["stage"], r["record_id"]) for r in rows)

    with JobRun(spark, lake, "ingest", run_id="ingest-ok") as job:
        job.write_quarantine(rejected("OK-1"))
    with pytest.raises(RuntimeError, match="killed"), JobRun(spark, lake, "ingest") as job:
        job.write_quarantine(rejected("FAILED-1", "FAILED-2"))
        raise RuntimeError("killed before bronze/citations")
    assert published() == [("ingest", "OK-1")]
    with JobRun(spark, lake, "curate", run_id="curate-ok") as job:
        job.write_quarantine(rejected("C-1", "C-2"))
        assert job.written("quarantine") == 2  # its partition's rows, not the table's
    assert published() == [("curate", "C-1"), ("curate", "C-2"), ("ingest", "OK-1")]
    # the next partition replace builds on a successful run's commit: a plain replace
    with JobRun(spark, lake, "curate", run_id="curate-again") as job:
        job.write_quarantine(rejected("C-3"))
    assert published() == [("curate", "C-3"), ("ingest", "OK-1")]


def test_a_table_only_a_failed_run_wrote_is_refused_and_a_leak_undo_publishes_no_failed_rows(
    spark, lake
):
    """The creating commit of a table carried no run id, so it counted as an outside writer's:
    a split that failed after writing silver/excluded_families left an empty, readable v0 (no
    exclusions at all: the next job's leakage audit passed on it). And write_audited's leak
    undo restored the newest commit, a failed run's, in an untagged commit that published it."""
    from datetime import date

    from lake.snapshots import succeeded_runs, visible
    from spark_jobs.lib.leakage import LeakageError, write_audited

    def frame(name, rows):
        return spark.createDataFrame(rows, table(name).spark_schema())

    with pytest.raises(RuntimeError, match="after its write"), JobRun(spark, lake, "split") as job:
        job.write(frame("silver/excluded_families", [("FQ", ["PQ"])]), "silver/excluded_families")
        raise RuntimeError("split failed after its write")
    refused = "only versions of runs that did not succeed"
    with pytest.raises(FileNotFoundError, match=refused), JobRun(spark, lake, "pairs") as job:
        job.read("silver/excluded_families")

    day = date(2020, 1, 1)
    patents = [
        (number, family, None, None, None, None, day, None, "A", None, None, ["en"], "en")
        for number, family in (("P1", "F1"), ("PQ", "FQ"))
    ]
    with JobRun(spark, lake, "split", run_id="split-ok") as job:
        job.write(frame("silver/patents", patents), "silver/patents")
        job.write(frame("silver/excluded_families", [("FQ", ["PQ"])]), "silver/excluded_families")

    def pair(recipe, anchor, family):
        view_pair = ("ABS-CLAIM", "cross_section", anchor, "en", "ABS", anchor, "en", "CLAIM")
        return (recipe, *view_pair, family, family)

    def write_pairs(run_id, recipe, anchor, family, audited=False):
        with JobRun(spark, lake, "build_pairs", run_id=run_id) as job:
            job.read("silver/patents"), job.read("silver/excluded_families")
            rows = frame("gold/stage1_pairs", [pair(recipe, anchor, family)])
            where = f"recipe = '{recipe}'"
            if not audited:
                job.write(rows, "gold/stage1_pairs", where)
                if run_id == "pairs-failed":
                    raise RuntimeError("build_pairs failed after its write")
                return
            write_audited(
                job, rows, "gold/stage1_pairs", where, id_columns=("anchor_id", "positive_id")
            )

    def rows_of(version):
        found = read_table(spark, lake, "gold/stage1_pairs", version).collect()
        return sorted((r["recipe"], r["anchor_id"]) for r in found)

    write_pairs("pairs-ok", "s", "P1", "F1")
    with pytest.raises(RuntimeError, match="after its write"):
        write_pairs("pairs-failed", "a", "P1", "F1")
    with pytest.raises(LeakageError):
        write_pairs("pairs-leak", "b", "PQ", "FQ", audited=True)
    published = visible(spark, lake, "gold/stage1_pairs", succeeded_runs(spark, lake))
    assert rows_of(published.version) == [("s", "P1")]  # what the jobs read
    assert rows_of(None) == [("s", "P1")]  # what any Delta reader sees as the latest


def test_rows_with_a_key_the_contract_lacks_or_without_a_not_null_key_are_refused(spark, lake):
    # createDataFrame takes dict values by field name: a misspelled key was dropped and its
    # column stored as null
    from lake import write_rows

    row = {"run_id": "r1", "name": "bm25", "created_at": None, "model_pth": "/m"}
    with pytest.raises(ValueError, match=r"eval/runs: row 0 has column\(s\) \['model_pth'\]"):
        write_rows(spark, [row], lake, "eval/runs")
    with pytest.raises(ValueError, match=r"row 0 lacks NOT NULL column\(s\) \['created_at'\]"):
        write_rows(spark, [{"run_id": "r1", "name": "bm25"}], lake, "eval/runs")


def test_failed_job_is_logged_with_its_error(spark, lake):
    write_table(spark, families(spark, [ROW]), lake, "silver/families")
    with (
        pytest.raises(FileNotFoundError, match="run the job that writes it"),
        JobRun(spark, lake, "unit", run_id="r2") as job,
    ):
        job.read("silver/patents")
    log = DeltaTable(f"{lake}/meta/job_runs").to_pandas()
    assert log[log.run_id == "r2"].iloc[0].status == "failed"


def test_a_run_id_already_in_the_run_log_is_refused(spark, lake):
    """--run-id was taken as given: a rerun under a failed run's id recorded a second row
    with that id, and the failed attempt's commits then read as the successful run's."""
    write_table(spark, families(spark, [ROW]), lake, "silver/families")
    with pytest.raises(FileNotFoundError), JobRun(spark, lake, "unit", run_id="again") as job:
        job.read("silver/patents")
    used = r"run id again.*meta/job_runs.*unit run that failed"
    with pytest.raises(ValueError, match=used), JobRun(spark, lake, "unit", run_id="again"):
        pass
    log = DeltaTable(f"{lake}/meta/job_runs").to_pandas()
    assert list(log[log.run_id == "again"].status) == ["failed"]
    with JobRun(spark, lake, "unit", run_id="fresh"):
        pass


def test_a_job_on_a_mistyped_lake_says_so_and_leaves_no_lake_behind(spark, tmp_path, capsys):
    """curate --lake data/laek said "run the job that writes it first" and created
    data/laek/meta/job_runs to record its failure: a lake holding nothing but that record."""
    typo = tmp_path / "laek"
    with (
        pytest.raises(
            FileNotFoundError, match=f"input table bronze/publications: no lake at {typo}"
        ),
        JobRun(spark, str(typo), "curate") as job,
    ):
        job.read("bronze/publications")
    assert not typo.exists()
    assert f"could not record the failed run: no lake at {typo}" in capsys.readouterr().err


def test_sql_on_a_delta_path_leaves_no_folder_where_the_driver_started(spark, lake):
    """`DESCRIBE HISTORY delta.`...`` creates the default database's folder, which Spark put
    at ./spark-warehouse under the directory the driver started in (a user's work folder)."""
    import tempfile
    from pathlib import Path

    spark.range(2).write.format("delta").save(f"{lake}/t")
    assert spark.sql(f"DESCRIBE HISTORY delta.`{lake}/t`").count() == 1
    info = dict(spark.sql("DESCRIBE DATABASE default").collect())
    where = Path(info["Location"].removeprefix("file:"))
    assert where.parent == Path(tempfile.gettempdir()), where
    assert where.is_dir() and where != Path.cwd() / "spark-warehouse"


def test_docs_tables_md_is_generated_from_the_contracts():
    from pathlib import Path

    from schemas.__main__ import markdown

    docs = Path(__file__).resolve().parents[1] / "docs" / "TABLES.md"
    assert docs.read_text() == markdown([]) + "\n", "run: python -m schemas > docs/TABLES.md"


def test_finish_keeps_the_exit_status_atexit_handlers_and_buffered_output(tmp_path):
    import subprocess
    import sys

    script = (
        "import atexit, sys\n"
        "from lake.cli import finish\n"
        f"atexit.register(lambda: open({str(tmp_path / 'atexit')!r}, 'w').write('ran'))\n"
        "sys.stdout.write('unflushed')\n"
        "finish(3)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 3, done.stderr
    assert done.stdout == "unflushed"
    assert (tmp_path / "atexit").read_text() == "ran"


@pytest.mark.parametrize(
    "module, argv, message",
    [
        ("spark_jobs.split", ["--eval-cutoff", "2025-02-30"], "got '2025-02-30'"),
        ("spark_jobs.build_pairs", ["--eval-cutoff", "soon"], "YYYY-MM-DD, got 'soon'"),
        ("spark_jobs.build_pairs", ["--max-pairs", "0"], "--max-pairs: must be >= 1, got 0"),
        ("spark_jobs.generate_sample", ["--patents", "-1"], "--patents: must be >= 1, got -1"),
        ("spark_jobs.generate_sample", ["--partitions", "0"], "--partitions: must be >= 1"),
        (
            "spark_jobs.mine_candidates",
            ["--retrieval", "r", "--encoder", "e", "--bm25-chars", "0"],
            "--bm25-chars: must be >= 1, got 0",
        ),
        (
            "evaluation.encode",
            ["--model", "m", "--input", "i", "--dims", "-3"],
            "--dims: must be >= 1, got -3",
        ),
        ("evaluation.significance", ["--k", "0"], "--k: must be >= 1, got 0"),
        # run ids and names become folders (<lake>/runs/<run id>) and SQL values
        (
            "evaluation.evaluate",
            ["--inputs", "i", "--model", "m", "--name", "a/b"],
            "argument --name: expected letters, digits and . _ + = @ -",
        ),
        (
            "evaluation.evaluate",
            ["--inputs", "i", "--model", "m", "--name", "x", "--run-id", "../{name}"],
            "--run-id: expected letters, digits and . _ + = @ - (first a letter or digit, "
            "at most 128), got '../x'",
        ),
        (
            "evaluation.encode",
            ["--model", "m", "--retrieval", "r", "--kind", "tac", "--encoder-name", "e' OR 1=1"],
            "argument --encoder-name: expected letters",
        ),
        # a mistyped --retrieval failed after the imports with "encode: /r/candidates"
        (
            "evaluation.encode",
            [
                "--model",
                "m",
                "--retrieval",
                "/nonexistent/r",
                "--kind",
                "tac",
                "--encoder-name",
                "e",
            ],
            "--retrieval /nonexistent/r holds no candidates/: run spark_jobs/prepare_retrieval.py",
        ),
        # a dense model's device: its spelling, and (before Spark) whether the machine has it
        (
            "evaluation.evaluate",
            ["--inputs", "i", "--model", "m", "--name", "x", "--device", "gpu"],
            "argument --device: 'gpu' is not a device: use auto",
        ),
        (
            "evaluation.evaluate",
            ["--inputs", "i", "--model", "bm25", "m", "--name", "b", "x", "--device", "cuda:9"],
            "--device cuda:9: ",  # no CUDA GPU here; on a GPU machine: it has fewer than ten
        ),
        # the Data Docs go to <lake>/reports/<run id>: '../../x' wrote them outside the lake
        (
            "expectations.run",
            ["--tables", "silver/views", "--run-id", "../../x"],
            "argument --run-id: expected letters",
        ),
        # a job's run id is a label too, as README says ("../a b'" ran and was recorded)
        ("spark_jobs.split", ["--run-id", "../a b'"], "argument --run-id: expected letters"),
        # a gate over no table validated nothing and passed
        ("expectations.run", ["--tables", " , "], "--tables names no table: ' , '"),
        # the folders Spark reads or writes go through path_or_uri (made absolute: a Spark
        # Connect server's Python workers failed on `mine_candidates --retrieval retrieval`)
        *(
            (module, [*argv, flag, ""], f"argument {flag}: an empty path names no folder")
            for module, argv, flag in [
                ("spark_jobs.curate", [], "--lake"),
                ("spark_jobs.ingest", [], "--input"),
                ("spark_jobs.generate_sample", [], "--out"),
                ("spark_jobs.export_training", ["--dataset", "stage1"], "--out"),
                ("spark_jobs.prepare_retrieval", [], "--out"),
                ("spark_jobs.prepare_evaluation", [], "--out"),
                ("spark_jobs.mine_candidates", ["--encoder", "e"], "--retrieval"),
                ("evaluation.evaluate", ["--model", "m", "--name", "x"], "--inputs"),
                ("evaluation.encode", ["--model", "m"], "--retrieval"),
                ("evaluation.encode", ["--model", "m"], "--input"),
                ("evaluation.encode", ["--model", "m", "--input", "i"], "--out"),
            ]
        ),
    ],
)
def test_job_flags_refuse_bad_values_by_name_before_spark_starts(module, argv, message, capsys):
    """A bad date or count is a usage error (exit 2) naming the flag and the value; before,
    `build_pairs --eval-cutoff soon` started Spark and failed in a query,
    `generate_sample --partitions -2` failed inside the job, and a negative `encode --dims`
    kept all but the last dims."""
    import importlib

    main = importlib.import_module(module).main
    out = "--out" if module.endswith("generate_sample") else "--lake"
    with pytest.raises(SystemExit) as exit_:
        main([out, "/nonexistent/xembed", *argv])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_sql_refuses_a_lake_path_that_holds_no_table(spark, tmp_path, monkeypatch, capsys):
    """A typo in --lake opened a spark-sql shell in which every table was "not found"."""
    from spark_jobs import sql

    assert sql.main(["--lake", str(tmp_path / "nolake"), "-e", "SELECT 1"]) == 2
    assert "sql: no lake at" in capsys.readouterr().err
    # without --lake: the lake every job defaults to ($XEMBED_LAKE, else ./data/lake), not ./lake
    monkeypatch.setattr(sql, "DEFAULT_LAKE", str(tmp_path / "jobs-lake"))
    assert sql.main(["-e", "SELECT 1"]) == 2
    assert f"sql: no lake at {tmp_path / 'jobs-lake'}" in capsys.readouterr().err
    monkeypatch.setattr(sql, "build_session", lambda *_: spark)
    monkeypatch.setattr(spark, "stop", lambda: None)  # the session is the suite's
    monkeypatch.setattr(sql.subprocess, "run", lambda *a, **k: pytest.fail("spark-sql started"))
    assert sql.main(["--lake", str(tmp_path), "-e", "SELECT 1"]) == 2
    assert f"sql: no lake table under {tmp_path}" in capsys.readouterr().err


def test_a_reader_of_a_table_that_was_never_written_is_told_so(spark, lake):
    """expectations.run on a mistyped --lake said the table "holds only versions of runs that
    did not succeed ()", sending the user to rerun a job instead of to the path."""
    from lake.snapshots import visible

    with pytest.raises(FileNotFoundError, match=r"table silver/patents does not exist at .*lake"):
        visible(spark, lake, "silver/patents", {})
