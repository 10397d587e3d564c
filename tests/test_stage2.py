"""Stage II: BM25 per language, mining, and the triplet rules on generated and hand-built data."""

from datetime import date

import numpy as np
import pandas as pd
import pytest
from deltalake import DeltaTable
from pyspark.sql import functions as F

from retrieval.search import Bm25, build_bm25_index, union_candidates
from schemas import table
from schemas.defaults import STAGE2_DROP_REASONS
from spark_jobs.lib import triplets as triplet_rules
from tests.conftest import private_copy

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def delta(lake, name):
    return DeltaTable(f"{lake}/{name}").to_pandas()


# --- BM25 ------------------------------------------------------------------------------------

DOCS = {
    "en": [
        ("E1", "A seed drill with a gyroscope and a gear"),
        ("E2", "A vacuum cleaner with a chain"),
        ("E3", "Battery module with a cooling plate"),
    ],
    "zh": [
        ("Z1", "一种播种机，包括陀螺仪和齿轮"),
        ("Z2", "一种吸尘器，包括链条和阀门"),
        ("Z3", "一种电池模组，包括冷却板"),
    ],
    "ja": [
        ("J1", "ジャイロスコープと歯車とを備える播種機"),
        ("J2", "チェーンとバルブとを備える電気掃除機"),
        ("J3", "冷却板を備える電池モジュール"),
    ],
}


def test_bm25_returns_the_matching_document_first_in_each_language(tmp_path):
    import json

    for lang, docs in DOCS.items():
        folder = tmp_path / "collections" / lang
        folder.mkdir(parents=True)
        (folder / "docs.json").write_text(
            "\n".join(json.dumps({"id": i, "contents": t}, ensure_ascii=False) for i, t in docs)
        )
        build_bm25_index(str(folder), str(tmp_path / "index" / lang), lang, threads=1)
    bm25 = Bm25(str(tmp_path / "index"))
    assert bm25.search("cooling plate battery", "en", 3)[0][0] == "E3"
    assert bm25.search("吸尘器 链条", "zh", 3)[0][0] == "Z2"
    assert bm25.search("播種機の歯車", "ja", 3)[0][0] == "J1"
    assert bm25.search("anything", "de", 3) == []  # no German index: no BM25 candidates


def test_union_alternates_bm25_and_dense_to_k_unique():
    bm25 = [("a", 9.0), ("b", 8.0), ("c", 7.0)]
    assert union_candidates(bm25, ["b", "d", "e"], 4) == ["a", "b", "d", "c"]
    assert union_candidates(bm25, ["x"], 10) == ["a", "x", "b", "c"]


@pytest.mark.parametrize("kind", ["ivf", "hnsw"])
def test_an_approximate_index_builds_on_a_small_corpus_and_returns_k_hits(kind):
    """IVF had 4 sqrt(n) lists whatever n (5 documents: FAISS failed to train 8 lists) and
    probed an eighth of them, so a search for k returned fewer than k hits (50 documents,
    k = 10: 5 to 7) and mining at k = 2,000 would have had few dense candidates. HNSW kept
    FAISS's 16 search candidates: 600 documents, k = 200 gave 50 to 70 hits."""
    import numpy as np

    from retrieval.search import DenseIndex

    rng = np.random.default_rng(0)
    for n, k in ((5, 10), (50, 10), (600, 200)):
        vectors = rng.normal(size=(n, 16)).astype("float32")
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        index = DenseIndex.build([f"d{i}" for i in range(n)], vectors, kind)
        _, rows = index.search(vectors[:4], k)
        assert [(r >= 0).sum() for r in rows] == [min(n, k)] * 4
        assert [r[0] for r in rows] == [0, 1, 2, 3]  # each vector finds itself first


def test_mining_opens_a_rebuilt_index_again(tmp_path):
    """Indexes are kept open per Python worker, and a Spark Connect server reuses its workers
    across jobs: a rerun after the index was rebuilt searched the old one."""
    import numpy as np

    from retrieval.search import DenseIndex
    from spark_jobs import mine_candidates

    folder = str(tmp_path / "faiss")
    for n in (3, 5):
        vectors = np.eye(n, 8, dtype="float32")
        DenseIndex.build([f"d{i}" for i in range(n)], vectors).save(folder, encoder="e")
        assert mine_candidates._open("dense", folder).ids == [f"d{i}" for i in range(n)]
    assert mine_candidates._open("dense", folder) is mine_candidates._open("dense", folder)


# --- properties over the generated corpus ----------------------------------------------------


def test_the_stage2_tables_and_the_mining_embeddings_pass_their_suites(spark, stage2):
    """The checks of labels against silver/patents, ids against the excluded families, null
    negatives and embedding norms hold on what the jobs write (the planted rows that fail
    them: tests/test_integration.py)."""
    from expectations.run import validate

    lake = stage2[0]
    tables = ["index/embeddings", "gold/stage2_candidates", "gold/stage2_examples"]
    rows = validate(spark, lake, [*tables, "gold/stage2_validation"], run_id="dq-stage2")
    assert [r for r in rows if r["critical"] and not r["success"]] == []
    assert {r["table_name"] for r in rows} >= set(tables)


def test_candidates_have_dense_scores_and_exactly_k_when_the_pool_allows(stage2):
    lake, _, mined, _ = stage2
    views = delta(lake, "gold/stage2_candidates")  # one row per query view, arrays
    assert (
        mined["query_views"] == len(views) == len(views.drop_duplicates(["query_id", "query_view"]))
    )
    for v in views.itertuples():
        n = v.n_available
        assert n == len(v.cand_ids) == len(set(v.cand_ids)) == len(v.dense_scores) <= 120
        assert len(v.bm25_ranks) == len(v.bm25_scores) == n
        assert not pd.isna(v.dense_scores).any()
        ranked = [r for r in v.bm25_ranks if not pd.isna(r)]
        assert len(set(ranked)) == len(ranked)
        if ranked:  # BM25's top hit always enters the union first
            assert v.bm25_ranks[0] == 1
    assert mined["candidate_rows"] == views.n_available.sum()
    ranks = pd.Series([r for v in views.bm25_ranks for r in v])
    assert ranks.notna().any() and ranks.isna().any() and mined["bm25_hits"] == ranks.notna().sum()


def test_examples_obey_every_negative_rule(stage2):
    lake, _, _, built = stage2
    examples = delta(lake, "gold/stage2_examples")
    validation = delta(lake, "gold/stage2_validation")
    assert len(examples) > 20 and len(validation) > 0 and built["examples"] == len(examples)
    patents = delta(lake, "silver/patents").set_index("publication_number")
    citations = delta(lake, "bronze/citations")
    x = citations[citations.is_x & citations.resolved].groupby("citing").cited.apply(set)
    family = patents.family_id
    for frame in (examples, validation):
        for e in frame.itertuples():
            negs = list(e.negative_ids)
            assert len(negs) == 8 and len(e.negative_origin) == 8
            neg_fams = [family[n] for n in negs]
            assert len(set(neg_fams)) == 8  # no two from one family
            assert e.query_family_id not in neg_fams
            positives = x.get(e.query_id, set())
            assert e.positive_id in positives
            assert not set(negs) & positives
            assert not set(neg_fams) & {family[p] for p in positives if p in family.index}
            filed = patents.filing_date[e.query_id]
            assert all(patents.publication_date[n] <= filed for n in negs)
            assert set(e.negative_origin) <= {a + b for a in "HML" for b in "HML"} | {"A"}
            # language priority: query-language negatives come first
            in_lang = [lang == e.query_lang for lang in e.negative_langs]
            assert in_lang == sorted(in_lang, reverse=True)
    labelled = lambda f: set(f.query_family_id) | set(f.positive_family_id)  # noqa: E731
    assert not labelled(examples) & labelled(validation)
    excluded = set(delta(lake, "silver/excluded_families").family_id)
    for frame in (examples, validation):
        assert not set(frame.query_family_id) & excluded
        assert not {family[n] for negs in frame.negative_ids for n in negs} & excluded


def test_exported_examples_name_the_query_and_positive_families(spark, stage2):
    """The trainer's batching keeps a query's and a positive's family away from the other
    examples of a batch and lets negative families repeat: the shards must say which is which."""
    from spark_jobs.lib.export import stage2_rows

    lake = stage2[0]
    read = lambda name: spark.read.format("delta").load(f"{lake}/{name}")  # noqa: E731
    rows = stage2_rows(
        read("gold/stage2_examples"), read("silver/views"), read("silver/patents")
    ).toPandas()
    keys = ["query_id", "query_view", "positive_id"]
    examples = delta(lake, "gold/stage2_examples").set_index(keys)
    family = delta(lake, "silver/patents").set_index("publication_number").family_id
    assert len(rows) == len(examples)
    for r in rows.itertuples():
        e = examples.loc[(r.query_id, r.query_view, r.positive_id)]
        assert (r.family_id, r.positive_family_id) == (e.query_family_id, e.positive_family_id)
        negatives = {family[n] for n in r.negative_ids}
        assert set(r.families) == {r.family_id, r.positive_family_id} | negatives


def test_dropped_views_are_recorded_with_reasons(stage2):
    lake, _, _, built = stage2
    dropped = delta(lake, "gold/stage2_dropped")
    assert set(dropped.reason) <= set(STAGE2_DROP_REASONS)
    for reason, n in dropped.groupby("reason")["count"].sum().items():
        assert built[f"dropped_{reason}"] == n


def test_a_validation_size_that_leaves_nothing_to_train_on_says_so(spark, stage2, tmp_path):
    """--validation-size larger than the examples took them all for validation, and the job
    failed with "gold/stage2_examples would be empty ... pass --allow-empty" (no word of the
    flag that caused it)."""
    from spark_jobs import build_triplets

    lake = private_copy(stage2[0], tmp_path)
    before = DeltaTable(f"{lake}/gold/stage2_examples").version()
    with pytest.raises(
        ValueError,
        match=r"--validation-size 100000 leaves nothing to train on: "
        r"the validation split \(whole query families\) took all [\d,]+ complete",
    ):
        build_triplets.run(spark, lake, seed=13, validation_size=100_000)
    assert DeltaTable(f"{lake}/gold/stage2_examples").version() == before


def test_mining_refuses_inputs_that_would_mine_less_than_asked(spark, stage2, tmp_path):
    """Each broken copy of the retrieval folder used to mine without an error: views without an
    embedding were skipped by the join, a missing BM25 index gave dense candidates only, and
    indexes built before the folder was prepared again searched its earlier pool."""
    import json
    import shutil

    import pyarrow.parquet as pq

    from spark_jobs import mine_candidates

    source_lake, source, _, _ = stage2
    lake = private_copy(source_lake, tmp_path)
    before = DeltaTable(f"{lake}/gold/stage2_candidates").version()
    queries = pq.read_table(f"{source}/queries")
    lang = queries.column("lang")[0].as_py()

    def broken(name, damage):
        folder = tmp_path / name
        shutil.copytree(source, folder)
        damage(folder)
        return str(folder)

    def unembedded(folder):  # a view prepared after the encoding
        extra = queries.slice(0, 1).to_pandas().assign(key=lambda f: f.key + "-new")
        extra.to_parquet(folder / "queries" / "extra.parquet")

    def other_encoder(folder):
        info = json.loads((folder / "faiss" / "index.json").read_text())
        assert info["encoder"] == "miner"  # recorded by evaluation.index faiss
        (folder / "faiss" / "index.json").write_text(json.dumps({**info, "encoder": "other"}))

    def built_over_an_earlier_pool(folder):  # prepared again, the index not rebuilt
        from retrieval.search import DenseIndex

        old = DenseIndex.load(str(folder / "faiss"), use_gpu=False)
        vectors = np.vstack([old.vectors[1:], old.vectors[:1]])
        DenseIndex.build([*old.ids[1:], "XX-0-OLD"], vectors).save(
            str(folder / "faiss"), encoder="miner"
        )

    def bm25_of_an_earlier_prepare(folder):  # prepared again, BM25 not rebuilt
        manifest = json.loads((folder / "_manifest.json").read_text())
        manifest["candidates"] += 1
        (folder / "_manifest.json").write_text(json.dumps(manifest))

    def encoded_before_a_new_prepare(folder):  # same keys, the texts may have changed
        record = json.loads((folder / "_encoded.json").read_text())
        assert set(record) == {"miner/query", "miner/tac"}  # recorded by evaluation.encode
        (folder / "_encoded.json").write_text(json.dumps({**record, "miner/query": "0" * 64}))

    def after_a_new_split(folder):  # the views may hold families the split excludes now
        manifest = json.loads((folder / "_manifest.json").read_text())
        manifest["delta_versions"]["silver/excluded_families"] -= 1
        (folder / "_manifest.json").write_text(json.dumps(manifest))

    cases = [
        (after_a_new_split, r"prepared from other table versions .* silver/excluded_families v"),
        (unembedded, r"1 of \d+ query views .* have no 'miner' query embedding .*-new"),
        (lambda f: shutil.rmtree(f / "bm25_index" / lang), rf"no BM25 index for .*{lang}"),
        (other_encoder, r"faiss holds \d+ embeddings of \d+ dimensions from encoder 'other'"),
        (lambda f: shutil.rmtree(f / "faiss"), r"no FAISS index"),
        (
            bm25_of_an_earlier_prepare,
            r"bm25_index was built from the collections of an earlier prepare_retrieval",
        ),
        (lambda f: (f / "bm25_index" / "index.json").unlink(), r"bm25_index has no index.json"),
        (
            lambda f: (f / "faiss" / "index.json").write_text(
                json.dumps({**json.loads((f / "faiss" / "index.json").read_text()), "encoded": "0"})
            ),
            r"faiss was built from embeddings encoded before .* was last prepared",
        ),
        (
            encoded_before_a_new_prepare,
            r"the 'query' embeddings of 'miner' in index/embeddings were not encoded from this "
            r"preparation",
        ),
        (lambda f: (f / "faiss" / "index.json").unlink(), r"no index.json beside index.faiss"),
        (
            built_over_an_earlier_pool,
            r"faiss is not built over .*candidates: it holds 1 document\(s\) outside the pool "
            r"\(e.g. 'XX-0-OLD'\) and lacks 1 of the pool's \d+ \(e.g. '",
        ),
    ]
    for i, (damage, message) in enumerate(cases):
        with pytest.raises(ValueError, match=message):
            mine_candidates.run(spark, lake, broken(f"r{i}", damage), "miner", k=120)
    assert DeltaTable(f"{lake}/gold/stage2_candidates").version() == before


def _leaky_mine(leaked, batches, *args):
    """The miner with one excluded patent planted among the first view's candidates (an index
    or pool defect the input checks did not see). Module level, so Spark's workers import it."""
    from spark_jobs.mine_candidates import mine

    for i, frame in enumerate(mine(batches, *args)):
        if i == 0 and len(frame):
            frame.at[frame.index[0], "cand_ids"] = [*frame["cand_ids"].iloc[0][:-1], leaked]
        yield frame


def test_a_mined_candidate_of_an_excluded_family_is_undone_and_fails(
    spark, stage2, tmp_path, monkeypatch
):
    """gold/stage2_candidates is Stage II's negative pool: its write is audited like the pairs
    and triplets, so a leak restores the table and fails the job instead of reaching triplets."""
    import functools

    from spark_jobs import mine_candidates
    from spark_jobs.lib.leakage import LeakageError

    source_lake, retrieval, _, _ = stage2
    lake = private_copy(source_lake, tmp_path)
    before = delta(lake, "gold/stage2_candidates")
    excluded = set(delta(lake, "silver/excluded_families").family_id)
    patents = delta(lake, "silver/patents")
    leaked = sorted(patents[patents.family_id.isin(excluded)].publication_number)[0]
    assert not before.cand_ids.map(lambda ids: leaked in set(ids)).any()
    monkeypatch.setattr(mine_candidates, "mine", functools.partial(_leaky_mine, leaked))
    with pytest.raises(
        LeakageError, match=rf"gold/stage2_candidates: \d+ value.*cand_ids={leaked}"
    ):
        mine_candidates.run(spark, lake, retrieval, "miner", k=120)
    after = delta(lake, "gold/stage2_candidates")
    assert len(after) == len(before)
    assert not after.cand_ids.map(lambda ids: leaked in set(ids)).any()


# --- a hand-built query view with known scores ---------------------------------------------


def hand_built(spark):
    """Query Q (zh, filed 2020-06-01) with positive P and 18 retrieved candidates C00..C17.

    Dense scores fall with the index (dense H: C00-C05, M: C06-C11, L: C12-C17); twelve
    candidates have BM25 ranks 1-12 (H: 1-4, M: 5-8, L: 9-12), six have none (L).
    """
    bm25 = {
        0: 1,
        1: 9,
        2: 5,
        3: 10,
        4: None,
        5: None,
        6: 2,
        7: 11,
        8: 6,
        9: 12,
        10: None,
        11: None,
        12: 3,
        13: 4,
        14: 7,
        15: 8,
        16: None,
        17: None,
    }
    rows = [("Q", "ABS", "zh", f"C{i:02d}", 1.0 - i * 0.05, bm25[i], None) for i in range(18)]
    rows.append(("Q", "ABS", "zh", "LATE", 0.99, 1, None))  # published after Q's filing
    rows.append(("Q", "ABS", "zh", "QF", 0.98, 2, None))  # Q's own family
    rows.append(("Q", "ABS", "zh", "PF", 0.97, 3, None))  # the positive's family
    compact = spark.createDataFrame(  # the stored form: one row per query view
        [("Q", "ABS", "zh", len(rows), *([list(c) for c in zip(*rows, strict=True)][3:7]))],
        table("gold/stage2_candidates").spark_schema(),
    )
    candidates = triplet_rules.candidate_rows(compact)
    langs = {f"C{i:02d}": ("zh" if i % 3 == 0 else "en") for i in range(18)}
    pool = spark.createDataFrame(
        [(c, lang) for c, lang in langs.items()]
        + [("LATE", "zh"), ("QF", "zh"), ("PF", "zh"), ("P", "en"), ("A1", "ja")],
        "id string, lang string",
    )
    patents = spark.createDataFrame(
        [(c, f"F{c}", date(2019, 1, 1), date(2018, 1, 1)) for c in langs]
        + [
            ("LATE", "FLATE", date(2021, 1, 1), date(2020, 1, 1)),
            ("QF", "FQ", date(2019, 1, 1), date(2018, 1, 1)),
            ("PF", "FP", date(2019, 1, 1), date(2018, 1, 1)),
            ("P", "FP", date(2019, 1, 1), date(2018, 1, 1)),
            ("A1", "FA", date(2019, 2, 1), date(2018, 2, 1)),
            ("Q", "FQ", date(2021, 1, 1), date(2020, 6, 1)),
        ],
        "publication_number string, family_id string, publication_date date, filing_date date",
    )
    positives = spark.createDataFrame(
        [("Q", "P", "FP", "en")],
        "query_id string, positive_id string, positive_family_id string, positive_lang string",
    )
    return candidates, pool, patents, positives


def test_a_query_language_without_bm25_documents_needs_no_index(tmp_path):
    """A German DESC-only patent (no TAC, so no German BM25 document) made every Stage II run
    refuse: "no BM25 index for de", which no rebuild could make."""
    from spark_jobs.mine_candidates import bm25_expected

    (tmp_path / "en").mkdir()
    manifest = {"bm25_documents": {"en": 2, "ja": 3}}
    documents, missing = bm25_expected(["de", "en", "ja"], manifest, tmp_path)
    assert documents == {"de": 0, "en": 2, "ja": 3} and missing == ["ja"]
    # a manifest from before the counts expects an index for every language
    assert bm25_expected(["de", "en"], {}, tmp_path) == ({"de": 1, "en": 1}, ["de"])


def test_equal_dense_scores_share_a_stratum(spark):
    """percent_rank ordered by (score, cand_id): of three candidates scored 0.8, two were
    high and one medium, by their publication numbers."""
    scores = [0.8, 0.8, 0.8, 0.2, 0.2, 0.2]
    filtered = spark.createDataFrame(
        [("Q", "ABS", f"C{i}", s, None) for i, s in enumerate(scores)],
        "query_id string, query_view string, cand_id string, dense_score double, bm25_rank int",
    )
    strata = {r.cand_id: r.stratum for r in triplet_rules.stratify(filtered).collect()}
    assert strata == {"C0": "HL", "C1": "HL", "C2": "HL", "C3": "ML", "C4": "ML", "C5": "ML"}


def test_hand_built_strata_corners_pool_and_language_priority(spark):
    candidates, pool_ids, patents, positives = hand_built(spark)
    queries = triplet_rules.query_info(patents.withColumn("primary_lang", F.lit("zh")))
    cands = triplet_rules.candidate_info(patents, pool_ids)
    pos = triplet_rules.positive_sets(positives)
    filtered = triplet_rules.filter_candidates(candidates, queries, cands, pos)
    assert sorted(r.cand_id for r in filtered.collect()) == [f"C{i:02d}" for i in range(18)]
    strata = {r.cand_id: r.stratum for r in triplet_rules.stratify(filtered).collect()}
    expected = {f"C{i:02d}": "HML"[i // 6] for i in range(18)}
    # BM25 levels by rank among the 12 ranked candidates: ranks 1-4 H, 5-8 M, 9-12 L.
    bm25_level = {
        1: "H",
        2: "H",
        3: "H",
        4: "H",
        5: "M",
        6: "M",
        7: "M",
        8: "M",
        9: "L",
        10: "L",
        11: "L",
        12: "L",
    }
    ranks = {r.cand_id: r.bm25_rank for r in candidates.collect()}
    for cand, dense in expected.items():
        expected[cand] = dense + (bm25_level[ranks[cand]] if ranks[cand] else "L")
    assert strata == expected
    assert (strata["C00"], strata["C01"], strata["C02"], strata["C04"]) == ("HH", "HL", "HM", "HL")
    assert (strata["C06"], strata["C12"], strata["C16"]) == ("MH", "LH", "LL")
    assert pd.Series(list(strata.values())).value_counts().max() <= 4

    sampled = triplet_rules.sample_strata(triplet_rules.stratify(filtered), seed=1)
    assert sampled.count() == 18  # <= 4 per stratum: all kept
    corners = triplet_rules.corner_counts(sampled).first()["corners"]
    assert (
        corners == sum(1 for s in strata.values() if s in triplet_rules.CORNERS) == 9
    )  # HH 1, HL 4, LH 2, LL 2

    a_rows = triplet_rules.allowed(
        spark.createDataFrame([("Q", "A1")], "query_id string, cand_id string"), queries, cands, pos
    ).select("query_id", "cand_id", "cand_lang", "cand_family_id")
    views = spark.createDataFrame([("Q", "ABS")], "query_id string, query_view string")
    pooled = triplet_rules.pool(sampled, a_rows, views)
    assert pooled.count() == 19 and pooled.where("origin = 'A'").count() == 1
    query_langs = spark.createDataFrame(
        [("Q", "ABS", "zh", "FQ")],
        "query_id string, query_view string, query_lang string, query_family_id string",
    )
    (example,) = triplet_rules.examples(pooled, positives, query_langs, seed=1).collect()
    zh = [
        c
        for c, lang in {**{f"C{i:02d}": ("zh" if i % 3 == 0 else "en") for i in range(18)}}.items()
        if lang == "zh"
    ]
    assert len(zh) == 6  # fewer than 8 in the query language: all 6, then the positive's (en)
    assert sorted(example.negative_ids[:6]) == sorted(zh)
    assert list(example.negative_langs) == ["zh"] * 6 + ["en"] * 2
    assert len(example.negative_ids) == 8


def test_a_query_without_filing_date_is_dropped_for_that_reason(spark):
    """A query whose filing date is unknown has no candidate left (none can be shown to
    predate it), and was recorded as `no_candidate_after_filters`, which reads as a mining
    or filter problem; a query whose candidates all fail the filters keeps that reason."""
    candidates, pool_ids, patents, positives = hand_built(spark)
    undated = spark.createDataFrame(  # R: undated, retrieved C00; S: dated, retrieved LATE only
        [("R", "FR", date(2021, 1, 1), None), ("S", "FS", date(2021, 1, 1), date(2020, 6, 1))],
        patents.schema,
    )
    patents = patents.unionByName(undated)
    extra = spark.createDataFrame(
        [("R", "ABS", "zh", "C00", 0.9, 1, None), ("S", "TAC", "zh", "LATE", 0.9, 1, None)],
        candidates.schema,
    )
    candidates = candidates.unionByName(extra)
    positives = positives.unionByName(
        spark.createDataFrame([("R", "P", "FP", "en"), ("S", "P", "FP", "en")], positives.schema)
    )
    queries = triplet_rules.query_info(patents)
    cands = triplet_rules.candidate_info(patents, pool_ids)
    filtered = triplet_rules.filter_candidates(
        candidates, queries, cands, triplet_rules.positive_sets(positives)
    )
    views = candidates.select("query_id", "query_view").distinct()
    lost = {
        (r.query_id, r.query_view): r.reason
        for r in triplet_rules.unfiltered_views(views, filtered, queries).collect()
    }
    assert lost == {("R", "ABS"): "no_filing_date", ("S", "TAC"): "no_candidate_after_filters"}
    assert set(lost.values()) <= set(STAGE2_DROP_REASONS)


def test_no_negative_is_an_x_citations_family_member_or_a_document_cited_as_y(spark):
    """Only the X positives in the training pool barred their families: D, X-cited by Q but
    outside the pool (no TAC), left its family member D2 free to be a negative. And A
    citations were taken row by row: Y1, cited by one search report as A and by another as
    Y, passed as an A negative. S1, X-cited by Q's family member QF, was a negative of Q."""
    candidates, pool_ids, patents, _ = hand_built(spark)
    patents = patents.unionByName(
        spark.createDataFrame(
            [
                ("D", "FD", date(2019, 1, 1), date(2018, 1, 1)),
                ("D2", "FD", date(2019, 1, 1), date(2018, 1, 1)),
                ("Y1", "FY", date(2019, 1, 1), date(2018, 1, 1)),
                ("S1", "FS", date(2019, 1, 1), date(2018, 1, 1)),
            ],
            patents.schema,
        )
    )
    pool_ids = pool_ids.unionByName(
        spark.createDataFrame([("D2", "zh"), ("Y1", "zh"), ("S1", "zh")], pool_ids.schema)
    )
    candidates = candidates.unionByName(
        spark.createDataFrame(
            [("Q", "ABS", "zh", "D2", 0.96, 4, None), ("Q", "ABS", "zh", "S1", 0.95, 5, None)],
            candidates.schema,
        )
    )

    def cited(index, doc, family, x=False, y=False, a=False, citing="Q"):
        letters = "X" * x + "Y" * y + "A" * a
        return (citing, index, doc, None, None, letters, "SEA", x, y, a, True, family)

    citations = spark.createDataFrame(
        [
            cited(0, "P", "FP", x=True),
            cited(1, "D", "FD", x=True),
            cited(2, "A1", "FA", a=True),
            cited(3, "Y1", "FY", a=True),
            cited(4, "Y1", "FY", y=True),
            cited(0, "S1", "FS", x=True, citing="QF"),  # Q's sibling X-cites S1
        ],
        table("bronze/citations").spark_schema(),
    )
    queries = triplet_rules.query_info(patents)
    cands = triplet_rules.candidate_info(patents, pool_ids)
    pos = triplet_rules.barred_sets(citations, patents)
    kept = {
        r.cand_id
        for r in triplet_rules.filter_candidates(candidates, queries, cands, pos).collect()
    }
    assert kept == {f"C{i:02d}" for i in range(18)}  # D2 and S1 barred with LATE, QF and PF
    a_rows = triplet_rules.a_citation_rows(citations).collect()
    assert [(r.query_id, r.cand_id) for r in a_rows] == [("Q", "A1")]


def test_corner_rule_drops_views_with_fewer_than_six(spark):
    frame = spark.createDataFrame(
        [
            ("Q", "ABS", f"C{i}", s)
            for i, s in enumerate(["HH", "HL", "LH", "LL", "HH", "MM", "MM", "HM"])
        ],
        "query_id string, query_view string, cand_id string, stratum string",
    )
    assert (
        triplet_rules.corner_counts(frame).first()["corners"] == 5
    )  # < 6: dropped by build_triplets
