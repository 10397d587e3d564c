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
    ours = results[results.run_id == "it"]  # other tests validate the session lake too
    assert len(ours) == len(rows) and set(ours.table_name) == set(TABLES)
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
        "silver/views",
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
        ("silver/views", "a text holds a visible character and n_chars counts it"),
        ("gold/stage1_pairs", "a pair type carries its signal"),
        ("gold/stage1_stats", "recipe,pair_type,anchor_lang,positive_lang"),
    } <= failed
    summarize(rows)
    err = capsys.readouterr().err
    assert "observed=None" not in err and "unexpected=None" not in err


@pytest.mark.spark
def test_planted_rows_that_contradict_their_own_or_another_table_fail_their_checks(spark, tmp_path):
    """Checks a reviewer's planted rows passed: an evaluation query id labelled with another
    family in Stage II, a null negative, a null dependency (which also switched the legal-edge
    check off), a technical edge to a later claim, a zero-width text and a false text_sha256,
    citation flags that contradict their letters, a resolved citation outside the corpus, an
    X citation of the query's own family, a pair of one text with itself."""
    import hashlib
    from datetime import UTC, datetime

    from lake import write_rows
    from schemas import table

    lake = str(tmp_path / "lake")

    def sha(text):
        return hashlib.sha256(text.encode()).hexdigest()

    def patent(number, family):
        return {
            "publication_number": number, "family_id": family, "application_number": None,
            "country_code": "US", "kind_code": "A1", "filing_date": date(2019, 1, 1),
            "publication_date": date(2020, 1, 1), "priority_date": None, "ipc_section": "A",
            "ipc_codes": ["A01B1/00"], "cpc_codes": [], "languages": ["en"], "primary_lang": "en",
        }  # fmt: skip

    def claim(number, depends_on):
        return {
            "publication_number": "P1", "family_id": "F1", "lang": "en", "claim_number": number,
            "text": "a b c", "independent": not depends_on, "depends_on": depends_on,
        }  # fmt: skip

    def edge(src, dst, relation):
        return {
            "publication_number": "P1", "family_id": "F1", "lang": "en", "src_claim": src,
            "dst_claim": dst, "relation": relation, "weight": 1.0 if relation == "legal" else 0.5,
            "evidence": "b c",
        }  # fmt: skip

    def view(number, family, name, text, digest=None):
        return {
            "publication_number": number, "family_id": family, "lang": "en", "view": name,
            "text": text, "n_chars": len(text), "text_sha256": digest or sha(text),
        }  # fmt: skip

    patents = [patent("P1", "F1"), patent("P3", "F2"), patent("Q1", "FQ"), patent("Q2", "FQ")]
    negatives = [f"N{i}" for i in range(1, 9)]
    write_rows(spark, [*patents, *(patent(n, f"F{n}") for n in negatives)], lake, "silver/patents")
    published = [
        dict.fromkeys(table("bronze/publications").spark_schema().fieldNames())
        | {k: p[k] for k in ("publication_number", "family_id", "publication_date")}
        | {"source_format": "canonical", "record_hash": p["publication_number"]}
        | {"ingested_at": datetime(2026, 1, 1, tzinfo=UTC)}
        for p in patents
    ]
    write_rows(spark, published, lake, "bronze/publications")
    write_rows(
        spark,
        [{"family_id": "FQ", "query_publication_numbers": ["Q1"]}],
        lake,
        "silver/excluded_families",
    )
    write_rows(spark, [claim(1, []), claim(2, [1]), claim(3, [1, None])], lake, "silver/claims")
    graph = [edge(2, 1, "legal"), edge(3, 2, "legal"), edge(1, 3, "technical")]
    write_rows(spark, graph, lake, "silver/claim_graph")
    views = [
        view("P1", "F1", "ABS", "\u200b\ufeff\u00ad"),
        view("P1", "F1", "CLAIM", "a claim", "0" * 64),
        view("P3", "F2", "ABS", "same text"),
        view("P3", "F2", "CLAIM", "same text"),
    ]
    write_rows(spark, views, lake, "silver/views")
    cited = {
        "citing": "P1", "cited": "P3", "cited_application": None, "npl_text": None,
        "source": "SEA", "is_y": False, "is_a": False, "resolved": True, "cited_family_id": "F2",
    }  # fmt: skip
    citations = [
        {**cited, "citation_index": 0, "category": "X", "is_x": False},
        {**cited, "citation_index": 1, "category": "YX", "is_x": True, "is_y": True},
        {**cited, "citation_index": 2, "category": "A", "is_x": False, "is_a": True,
         "cited": "ZZ-999-A", "cited_family_id": None},
    ]  # fmt: skip
    write_rows(spark, citations, lake, "bronze/citations")
    query = {
        "publication_number": "Q1", "family_id": "FQ", "lang": "en", "ipc_section": "A",
        "filing_date": date(2025, 2, 1), "x_cited": ["Q2"], "n_x_cited": 5,
    }  # fmt: skip
    write_rows(spark, [query], lake, "silver/eval_queries")
    pair = {
        "recipe": "xembed", "pair_type": "ABS-CLAIM", "signal": "cross_section",
        "anchor_id": "P3", "anchor_lang": "en", "anchor_view": "ABS", "positive_id": "P3",
        "positive_lang": "en", "positive_view": "CLAIM", "family_id": "F2",
        "positive_family_id": "F2",
    }  # fmt: skip
    write_rows(spark, [pair], lake, "gold/stage1_pairs")
    candidates = {
        "query_id": "Q1", "query_view": "ABS", "query_lang": "en", "n_available": 2,
        "cand_ids": ["N1", "N2"], "dense_scores": [0.5, 0.4], "bm25_ranks": [1, 2],
        "bm25_scores": [3.0, 2.0],
    }  # fmt: skip
    write_rows(spark, [candidates], lake, "gold/stage2_candidates")
    example = {
        "query_view": "ABS", "query_lang": "en", "positive_id": "P3", "positive_lang": "en",
        "positive_family_id": "F2", "negative_langs": ["en"] * 8, "negative_origin": ["HH"] * 8,
    }  # fmt: skip
    examples = [
        {**example, "query_id": "P1", "query_family_id": "F1", "negative_ids": [None, *negatives[1:]]},
        {**example, "query_id": "Q1", "query_family_id": "F1", "negative_ids": negatives},
    ]  # fmt: skip
    write_rows(spark, examples, lake, "gold/stage2_examples")
    write_rows(spark, [], lake, "gold/stage2_validation")
    vectors = [("P1", [0.6, 0.8]), ("P3", [3.0, 4.0]), ("N1", [1.0, 0.0, 0.0])]
    embeddings = [
        {"encoder": "miner", "kind": "tac", "id": i, "lang": "en", "embedding": v}
        for i, v in vectors
    ]
    write_rows(spark, embeddings, lake, "index/embeddings")
    tables = [
        "silver/claims", "silver/claim_graph", "silver/views", "bronze/citations",
        "silver/eval_queries", "gold/stage1_pairs", "gold/stage2_candidates",
        "gold/stage2_examples", "index/embeddings",
    ]  # fmt: skip
    rows = validate(spark, lake, tables, run_id="planted")
    # each failed for the rows it found, none because its query could not run
    assert [r for r in rows if str(r["observed"]).startswith("error:")] == []
    failed = {(r["table_name"], r["column"]) for r in rows if r["critical"] and not r["success"]}
    assert {
        ("silver/claims", "a claim depends on earlier claims only"),
        ("silver/claim_graph", "an edge points to an earlier claim"),
        ("silver/claim_graph", "a legal edge is a dependency of silver/claims"),
        ("silver/views", "text_sha256 is the SHA-256 of text"),
        ("silver/views", "a text holds a visible character and n_chars counts it"),
        ("bronze/citations", "category letters are sorted and is_x, is_y, is_a say which it holds"),
        ("bronze/citations", "a citation is resolved exactly when its cited publication is in the corpus"),
        ("silver/eval_queries", "n_x_cited counts x_cited"),
        ("silver/eval_queries", "no X citation of the query's own family"),
        ("gold/stage1_pairs", "a pair joins two different texts"),
        ("gold/stage2_candidates", "no evaluation family among queries and candidates"),
        ("gold/stage2_examples", "exactly 8 negatives, each with a language and an origin"),
        ("gold/stage2_examples", "no evaluation family in Stage II examples"),
        ("gold/stage2_examples", "query_family_id and positive_family_id are their patents' families"),
        ("index/embeddings", "an embedding is finite and L2-normalised"),
        ("index/embeddings", "one dimension per encoder"),
    } <= failed  # fmt: skip
    # and only the planted rows: the normalised 2-dimensional vector passes both
    embedded = [r for r in rows if r["table_name"] == "index/embeddings" and not r["success"]]
    assert {r["column"] for r in embedded} == {
        "an embedding is finite and L2-normalised",
        "one dimension per encoder",
    }
