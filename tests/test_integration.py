"""generate 300 patents -> ingest -> curate -> split -> data quality, on real Delta tables."""

from datetime import date
from pathlib import Path

import pytest
from deltalake import DeltaTable

from expectations.run import validate
from expectations.suites import SUITES, tables_queried
from spark_jobs import ingest
from spark_jobs.lib.leakage import LeakageError, audit_no_leakage
from tests.conftest import copy_lake

pytestmark = [pytest.mark.spark, pytest.mark.integration]

TABLES = [
    "bronze/publications",
    "bronze/citations",
    "quarantine",
    "silver/patents",
    "silver/families",
    "silver/views",
    "silver/claims",
    "silver/eval_queries",
    "silver/excluded_families",
]


def delta(lake, name):
    return DeltaTable(f"{lake}/{name}").to_pandas()


def test_every_table_is_a_real_delta_table_readable_by_delta_rs(spark, pipeline):
    _, _, lake, _ = pipeline
    for name in TABLES:
        frame = delta(lake, name)
        assert len(frame) == spark.read.format("delta").load(f"{lake}/{name}").count(), name
        assert (Path(lake) / name / "_delta_log").is_dir()


def test_nothing_is_lost_and_quarantine_matches_the_planted_corruptions(pipeline):
    manifest, metrics, lake, _ = pipeline
    m = metrics["ingest"]
    assert m["records_total"] == manifest["lines"]
    quarantine = delta(lake, "quarantine")
    by_reason = quarantine[quarantine.stage == "ingest"].reason.str.split(":").str[0].value_counts()
    assert by_reason.to_dict() == {k: v for k, v in manifest["expected_quarantine"].items() if v}
    assert m["records_kept"] == manifest["clean_records"] + manifest["corruptions"].get(
        "exact_duplicate", 0
    )
    assert metrics["curate"]["patents_out"] == m["records_kept"]
    assert quarantine.record.str.len().min() > 0


def test_views_claims_and_families_are_consistent(pipeline):
    _, _, lake, _ = pipeline
    patents, views, claims = (
        delta(lake, "silver/patents"),
        delta(lake, "silver/views"),
        delta(lake, "silver/claims"),
    )
    assert set(views.view) == {"ABS", "CLAIM", "DESC", "TAC", "FIC", "TITLE"}
    assert {"zh", "en", "ja"} <= set(views.lang)
    assert (
        set(patents.ipc_section.dropna()) <= set("ABCDEFGH") and len(set(patents.ipc_section)) >= 5
    )
    assert not views.duplicated(["publication_number", "lang", "view"]).any()
    fic = views[views.view == "FIC"].set_index(["publication_number", "lang"]).text
    first = claims[claims.claim_number == 1].set_index(["publication_number", "lang"]).text
    assert (fic == first.reindex(fic.index)).all()  # claim 1 is independent in generated data
    assert claims.depends_on.map(len).gt(0).any()
    families = delta(lake, "silver/families")
    assert families.n_members.sum() == len(patents)


def test_split_excludes_whole_query_families_and_the_audit_guards_training(spark, pipeline):
    _, _, lake, _ = pipeline
    queries, excluded = delta(lake, "silver/eval_queries"), delta(lake, "silver/excluded_families")
    assert len(queries) >= 3 and (queries.n_x_cited >= 1).all()
    assert (queries.filing_date >= date(2025, 1, 1)).all()
    assert set(queries.family_id) == set(excluded.family_id)
    patents = spark.read.format("delta").load(f"{lake}/silver/patents")
    excl = spark.read.format("delta").load(f"{lake}/silver/excluded_families")
    views = spark.read.format("delta").load(f"{lake}/silver/views")
    training = views.join(excl, "family_id", "left_anti")
    audit_no_leakage(
        training,
        "training pool",
        patents,
        excl,
        id_columns=("publication_number",),
        family_columns=("family_id",),
    )
    with pytest.raises(LeakageError):
        audit_no_leakage(views, "silver/views", patents, excl, id_columns=("publication_number",))


def test_rerun_is_idempotent(spark, pipeline, tmp_path):
    lake, sample = copy_lake(pipeline, tmp_path), pipeline[3]
    before = {t: delta(lake, t) for t in ("bronze/publications", "bronze/citations", "quarantine")}
    ingest.run(spark, lake, sample, "google_patents")
    for name, old in before.items():
        new = delta(lake, name)
        cols = [c for c in old.columns if c not in ("ingested_at", "source_file")]
        assert len(new) == len(old), name
        a = old[cols].astype(str).sort_values(cols).reset_index(drop=True)
        b = new[cols].astype(str).sort_values(cols).reset_index(drop=True)
        assert a.equals(b), name
    runs = delta(lake, "meta/job_runs")
    assert (runs.job == "ingest").sum() == 2 and set(runs.status) == {"succeeded"}
    latest = runs[runs.job == "curate"].iloc[0]
    assert dict(latest.inputs)["bronze/publications"] >= 1


def test_data_quality_passes_and_writes_results_and_data_docs(spark, pipeline):
    _, _, lake, _ = pipeline
    rows = validate(spark, lake, TABLES, run_id="it")
    failed = [r for r in rows if r["critical"] and not r["success"]]
    assert not failed, failed
    results = delta(lake, "dq/results")
    assert len(results[results.run_id == "it"]) == len(rows) and set(results.table_name) == set(
        TABLES
    )
    assert (Path(lake) / "reports" / "it" / "index.html").exists()
    # Rerunning the same run id replaces its rows.
    validate(spark, lake, ["silver/families"], run_id="it")
    results = delta(lake, "dq/results")
    assert len(results[results.run_id == "it"]) == len(rows)


def test_dq_of_all_tables_validates_those_the_lake_holds(spark, pipeline, monkeypatch, capsys):
    """`expectations.run --tables all`, where the README runs it (after split, before
    build_pairs), failed on the first gold table: "does not exist ... run the job"."""
    from expectations import run

    _, _, lake, _ = pipeline
    validated = []
    monkeypatch.setattr(run, "build_session", lambda *_: spark)
    monkeypatch.setattr(run, "validate", lambda _, __, tables, *___: validated.extend(tables) or [])
    assert run.main(["--lake", lake, "--tables", "all"]) == 0
    held = [t for t in SUITES if (Path(lake) / t / "_delta_log").is_dir()]
    assert validated == held and set(TABLES) <= set(held) and len(held) < len(SUITES)
    absent = ", ".join(t for t in SUITES if t not in held)
    assert f"dq: not written yet, not validated: {absent}\n" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run.main(["--lake", str(Path(lake).parent / "laek"), "--tables", "all"])
    assert "--tables all: no table with a suite under" in capsys.readouterr().err


def test_a_dq_run_pins_only_the_tables_its_suites_query():
    # a run validating one table reads (and pins the visible version of) that table and the
    # tables its cross-table expectations query as dq_<path> views, not the whole lake
    assert tables_queried("gold/stage1_pairs") == {
        "bronze/citations",
        "silver/excluded_families",
        "silver/patents",
    }
    assert tables_queried("silver/claim_graph") == {"silver/claims"}
    assert tables_queried("gold/stage2_examples") >= {"gold/stage2_validation"}
    assert tables_queried("silver/views") == set()


def test_a_planted_violation_fails_a_critical_expectation(spark, pipeline, tmp_path):
    _, _, lake, _ = pipeline
    bad_lake = str(tmp_path / "bad")
    families = spark.read.format("delta").load(f"{lake}/silver/families")
    duplicated = families.unionByName(families.limit(1))
    duplicated.write.format("delta").save(f"{bad_lake}/silver/families")
    rows = validate(spark, bad_lake, ["silver/families"], run_id="bad")
    failed = {r["expectation_type"] for r in rows if r["critical"] and not r["success"]}
    assert failed == {"expect_column_values_to_be_unique"}


def test_planted_leaks_blanks_repeats_and_mislabels_fail_their_checks(
    spark, pipeline, tmp_path, capsys
):
    """Checks a reviewer showed could not fail: nothing compared silver/excluded_families
    with the queries every leakage check trusts it for; a blank text passed silver/views; a
    stats key twice passed; a CITATION pair labelled cross_section passed. And the failure
    lines showed no value ("unexpected=None observed=None")."""
    from pyspark.sql import functions as F

    from expectations.run import summarize
    from schemas import table

    _, _, lake, _ = pipeline
    bad = str(tmp_path / "bad")

    def read(name):
        return spark.read.format("delta").load(f"{lake}/{name}")

    def plant(frame, name):
        frame.write.format("delta").save(f"{bad}/{name}")

    queries = read("silver/eval_queries")
    lost = queries.orderBy("family_id").first()["family_id"]
    plant(queries, "silver/eval_queries")
    plant(
        read("silver/excluded_families").where(F.col("family_id") != lost),
        "silver/excluded_families",
    )
    plant(read("silver/patents"), "silver/patents")
    plant(read("silver/views").limit(1).withColumn("text", F.lit(" \u3000\u2003")), "silver/views")
    plant(read("bronze/citations"), "bronze/citations")
    pair = ("r4", "CITATION", "cross_section", "A-1", "en", "TAC", "B-1", "en", "TAC", "FA", "FB")
    plant(
        spark.createDataFrame([pair], table("gold/stage1_pairs").spark_schema()),
        "gold/stage1_pairs",
    )
    stats = [("r4", "CITATION", "citation", "en", "en", n) for n in (3, 5)]
    plant(
        spark.createDataFrame(stats, table("gold/stage1_stats").spark_schema()), "gold/stage1_stats"
    )

    tables = ["silver/eval_queries", "silver/views", "gold/stage1_pairs", "gold/stage1_stats"]
    rows = validate(spark, bad, tables, run_id="planted")
    failed = {(r["table_name"], r["column"]) for r in rows if r["critical"] and not r["success"]}
    assert {
        ("silver/eval_queries", "every query family is excluded from training"),
        ("silver/views", "a text holds a non-blank character and n_chars counts it"),
        ("gold/stage1_pairs", "a pair type carries its signal"),
        ("gold/stage1_stats", "recipe,pair_type,anchor_lang,positive_lang"),
    } <= failed
    summarize(rows)
    err = capsys.readouterr().err
    assert "observed=None" not in err and "unexpected=None" not in err
