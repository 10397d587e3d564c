"""Stage I pairs on a hand-built corpus with known answers, and the training-shard export."""

import json
from pathlib import Path

import pandas as pd
import pytest
from deltalake import DeltaTable

from lake import JobRun, write_table
from schemas import table
from spark_jobs import build_pairs, export_training
from spark_jobs.lib.leakage import LeakageError, write_audited
from spark_jobs.lib.pairs import quotas, signal_quotas, view_keys
from tests.conftest import private_copy, views_frame

# one worker builds this module's shared lakes once (`corpus`, `built`)
pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("pairs")]

# (publication, family, lang, view, text)
VIEWS = [
    ("US-1-B2", "F1", "en", "ABS", "A cup with a handle."),
    ("US-1-B2", "F1", "en", "CLAIM", "1. A cup comprising a handle."),
    ("US-1-B2", "F1", "en", "DESC", "The cup has a handle 10."),
    ("US-1-B2", "F1", "en", "FIC", "A cup comprising a handle."),
    ("CN-1-A", "F1", "zh", "ABS", "一种带把手的杯子。"),
    ("CN-1-A", "F1", "zh", "CLAIM", "1. 一种杯子，包括把手。"),
    ("CN-1-A", "F1", "en", "ABS", "A cup having a handle (machine translation)."),
    ("JP-1-A", "F1", "ja", "ABS", "取っ手付きカップ。"),
    ("JP-1-A", "F1", "ja", "CLAIM", "【請求項１】取っ手を備えるカップ。"),
    ("JP-1-A", "F1", "ja", "DESC", "カップは取っ手１０を有する。"),
    ("EP-2-A1", "F2", "en", "ABS", "A lid for a cup."),
    ("EP-2-A1", "F2", "en", "CLAIM", "1. A lid."),
    ("EP-2-A1", "F2", "en", "DESC", "The lid 20 closes the cup."),
    ("US-2-A1", "F2", "en", "ABS", "A lid for a cup."),  # same texts as EP-2: duplicate pair
    ("US-2-A1", "F2", "en", "CLAIM", "1. A lid."),
    ("US-3-A1", "F3", "en", "ABS", "A saucer."),
    ("US-3-A1", "F3", "en", "CLAIM", "1. A saucer."),
    ("US-3-A1", "F3", "en", "DESC", "1. A saucer."),  # identical to its claims: no CLAIM-DESC
    ("CN-9-A", "F9", "zh", "ABS", "一种茶壶。"),  # F9 is an evaluation family
    ("CN-9-A", "F9", "zh", "CLAIM", "1. 一种茶壶。"),
    ("US-9-A1", "F9", "en", "ABS", "A teapot."),
    ("US-9-A1", "F9", "en", "CLAIM", "1. A teapot."),
]

EXPECTED = {
    ("ABS-CLAIM", "US-1-B2", "en", "US-1-B2", "en"),
    ("ABS-CLAIM", "CN-1-A", "zh", "CN-1-A", "zh"),
    ("ABS-CLAIM", "JP-1-A", "ja", "JP-1-A", "ja"),
    ("ABS-CLAIM", "EP-2-A1", "en", "EP-2-A1", "en"),
    ("ABS-CLAIM", "US-3-A1", "en", "US-3-A1", "en"),
    ("CLAIM-DESC", "US-1-B2", "en", "US-1-B2", "en"),
    ("CLAIM-DESC", "JP-1-A", "ja", "JP-1-A", "ja"),
    ("CLAIM-DESC", "EP-2-A1", "en", "EP-2-A1", "en"),
    ("ABS-ABS", "CN-1-A", "zh", "JP-1-A", "ja"),
    ("ABS-ABS", "CN-1-A", "en", "JP-1-A", "ja"),
    ("ABS-ABS", "CN-1-A", "zh", "US-1-B2", "en"),
    ("ABS-ABS", "JP-1-A", "ja", "US-1-B2", "en"),
    ("CLAIM-CLAIM", "CN-1-A", "zh", "JP-1-A", "ja"),
    ("CLAIM-CLAIM", "CN-1-A", "zh", "US-1-B2", "en"),
    ("CLAIM-CLAIM", "JP-1-A", "ja", "US-1-B2", "en"),
}


@pytest.fixture(scope="module")
def corpus(spark, tmp_path_factory):
    """The hand-built corpus, no pairs yet; tests that write take a `private_copy`."""
    lake = str(tmp_path_factory.mktemp("pairs") / "lake")
    write_table(spark, views_frame(spark, VIEWS), lake, "silver/views")
    views = pd.DataFrame(VIEWS, columns=["publication_number", "family_id", "lang", "view", "text"])
    patents = views.groupby("publication_number").agg(
        family_id=("family_id", "first"), languages=("lang", lambda s: sorted(set(s)))
    )
    rows = [
        (
            pn,
            r.family_id,
            None,
            pn[:2],
            None,
            None,
            pd.Timestamp("2020-01-01").date(),
            None,
            "A",
            [],
            [],
            r.languages,
            {"US": "en", "EP": "en", "CN": "zh", "JP": "ja"}[pn[:2]],  # as curate's claims
        )
        for pn, r in patents.iterrows()
    ]
    write_table(
        spark,
        spark.createDataFrame(rows, table("silver/patents").spark_schema()),
        lake,
        "silver/patents",
    )
    write_table(
        spark,
        spark.createDataFrame(
            [("F9", ["CN-9-A"])], table("silver/excluded_families").spark_schema()
        ),
        lake,
        "silver/excluded_families",
    )
    return lake


@pytest.fixture(scope="module")
def built(spark, corpus, tmp_path_factory):
    """`corpus` with the paper's pairs (recipe xembed) built once: (lake, the job's metrics)."""
    lake = private_copy(corpus, tmp_path_factory.mktemp("built"))
    return lake, build_pairs.run(spark, lake)


def pair_rows(lake):
    frame = DeltaTable(f"{lake}/gold/stage1_pairs").to_pandas()
    return frame, {
        tuple(r)
        for r in frame[
            ["pair_type", "anchor_id", "anchor_lang", "positive_id", "positive_lang"]
        ].itertuples(index=False)
    }


def test_xembed_pairs_are_exactly_the_expected_rows(built):
    lake, metrics = built
    frame, got = pair_rows(lake)
    assert got == EXPECTED
    assert len(frame) == len(EXPECTED)  # one row per unordered pair
    assert set(frame.family_id) == {"F1", "F2", "F3"}
    views = dict(
        zip(frame.pair_type, zip(frame.anchor_view, frame.positive_view, strict=True), strict=True)
    )
    assert views == {
        "ABS-CLAIM": ("ABS", "CLAIM"),
        "CLAIM-DESC": ("CLAIM", "DESC"),
        "ABS-ABS": ("ABS", "ABS"),
        "CLAIM-CLAIM": ("CLAIM", "CLAIM"),
    }
    assert metrics["dropped_identical_text"] == 1 and metrics["dropped_duplicate_text_pair"] == 1
    stats = DeltaTable(f"{lake}/gold/stage1_stats").to_pandas()
    assert stats.n_pairs.sum() == len(EXPECTED)
    assert (
        stats.set_index(["pair_type", "anchor_lang", "positive_lang"]).n_pairs[
            ("ABS-ABS", "zh", "ja")
        ]
        == 1
    )


def test_recipes_replace_only_their_own_partition(spark, built, tmp_path):
    lake = private_copy(built[0], tmp_path)
    build_pairs.run(spark, lake, recipe="r3")
    build_pairs.run(spark, lake, recipe="r3")  # a rerun replaces, never duplicates
    frame = DeltaTable(f"{lake}/gold/stage1_pairs").to_pandas()
    assert len(frame[frame.recipe == "xembed"]) == len(EXPECTED)
    r3 = frame[frame.recipe == "r3"]
    assert ("ABS-FIC", "US-1-B2") in set(zip(r3.pair_type, r3.anchor_id, strict=True))
    assert not r3.duplicated(["pair_type", "anchor_id", "anchor_lang"]).any()


def test_family_cap_and_max_pairs_sample_deterministically(spark, corpus, tmp_path):
    lake = private_copy(corpus, tmp_path)
    build_pairs.run(spark, lake, family_cap=1, seed=3)
    capped, rows = pair_rows(lake)
    assert capped.groupby(["family_id", "pair_type"]).size().max() == 1
    assert len(capped) == 4 + 2 + 1  # F1: every type; F2: ABS-CLAIM, CLAIM-DESC; F3: ABS-CLAIM
    assert rows <= EXPECTED
    build_pairs.run(spark, lake, max_pairs=7, seed=5)
    first_frame, first = pair_rows(lake)
    build_pairs.run(spark, lake, max_pairs=7, seed=5)
    second_frame, second = pair_rows(lake)
    assert first == second and len(second_frame) == 7  # identical rows, replaced not appended
    assert first <= EXPECTED
    counts = first_frame.pair_type.value_counts().to_dict()
    signal_of = dict(zip(first_frame.pair_type, first_frame.signal, strict=False))
    available = {"ABS-CLAIM": 5, "CLAIM-DESC": 3, "ABS-ABS": 4, "CLAIM-CLAIM": 3}
    assert counts == signal_quotas(available, signal_of, 7)
    assert first_frame.groupby("signal").size().to_dict() == quotas(
        {"cross_section": 8, "cross_language": 7}, 7
    )
    # more than available: all of them, with a warning and the shortfall in the counters
    metrics = build_pairs.run(spark, lake, max_pairs=5000, seed=5)
    assert metrics["pairs_written"] == 15 and metrics["max_pairs_shortfall"] == 5000 - 15


def test_view_keys_read_curates_hash_and_hash_older_tables_alike(spark):
    frame = views_frame(spark, VIEWS)
    stored = {tuple(r) for r in view_keys(frame).collect()}
    hashed_here = {tuple(r) for r in view_keys(frame.drop("text_sha256")).collect()}
    assert stored == hashed_here and len(stored) == len(VIEWS)
    assert {r.text_hash for r in view_keys(frame).collect()} == {
        r.text_sha256 for r in frame.collect()
    }


def test_quotas_are_proportional_and_exact():
    assert quotas({"a": 50, "b": 30, "c": 20}, 10) == {"a": 5, "b": 3, "c": 2}
    assert sum(quotas({"a": 7, "b": 7, "c": 7}, 10).values()) == 10
    assert quotas({"a": 3}, 10) == {"a": 3}


def test_a_leaking_write_is_undone_and_fails(spark, built, tmp_path):
    lake = private_copy(built[0], tmp_path)
    before = DeltaTable(f"{lake}/gold/stage1_pairs").to_pandas()
    leak = spark.createDataFrame(
        [
            (
                "xembed",
                "ABS-ABS",
                "cross_language",
                "CN-9-A",
                "zh",
                "ABS",
                "US-9-A1",
                "en",
                "ABS",
                "F9",
                "F9",
            )
        ],
        table("gold/stage1_pairs").spark_schema(),
    )
    with (
        pytest.raises(LeakageError, match="gold/stage1_pairs"),
        JobRun(spark, lake, "leak-test") as job,
    ):
        write_audited(
            job,
            leak,
            "gold/stage1_pairs",
            id_columns=("anchor_id", "positive_id"),
            family_columns=("family_id",),
        )
    after = DeltaTable(f"{lake}/gold/stage1_pairs").to_pandas()
    assert len(after) == len(before) and "F9" not in set(after.family_id)


def test_export_round_trip_parquet_and_swift_jsonl(spark, built, tmp_path, monkeypatch):
    lake = private_copy(built[0], tmp_path)
    texts = {(p, lang, v): t for p, _, lang, v, t in VIEWS}
    out = tmp_path / "parquet"
    manifest = export_training.run(spark, lake, "stage1", "parquet", str(out), rows_per_shard=6)
    shards = sorted(out.glob("shard-*.parquet"))
    assert [s.name for s in shards] == [s["file"] for s in manifest["shards"]] and len(shards) == 3
    rows = pd.concat([pd.read_parquet(s) for s in shards])
    assert manifest["rows"] == len(rows) == len(EXPECTED)
    assert sum(s["rows"] for s in manifest["shards"]) == len(rows)
    assert [s["bytes"] for s in manifest["shards"]] == [f.stat().st_size for f in shards]
    for r in rows.itertuples():
        assert r.anchor_text == texts[(r.anchor_id, r.anchor_lang, r.anchor_view)]
        assert r.positive_text == texts[(r.positive_id, r.positive_lang, r.positive_view)]
    assert set(manifest["delta_versions"]) == {
        "gold/stage1_pairs",
        "silver/views",
        "silver/patents",  # read by the leakage audit of the rows written
        "silver/excluded_families",
    }
    assert manifest["leakage_audit"]["status"] == "passed"
    assert manifest["leakage_audit"]["rows_checked"] == len(EXPECTED)
    # the command line's arguments name no recipe: the run log records the one exported
    cli_args = {"dataset": "stage1", "format": "parquet", "out": str(out), "recipe": None}
    again = export_training.run(
        spark, lake, "stage1", "parquet", str(out), rows_per_shard=6, args=cli_args
    )
    assert (
        again["content_hash"] == manifest["content_hash"] and again["shards"] == manifest["shards"]
    )
    runs = DeltaTable(f"{lake}/meta/job_runs").to_pandas()
    exports = runs[runs.job == "export_training"].sort_values("finished_at")
    assert json.loads(exports.args_json.iloc[-1])["recipe"] == "xembed"

    # an export killed after its shards, before its manifest: the same shard names and row
    # counts with other texts (--max-chars 8) must not sit beside the old manifest, which the
    # trainer would accept
    def killed(*_):
        raise RuntimeError("killed before the manifest")

    with monkeypatch.context() as patch:
        patch.setattr(export_training.export_rules, "shard_counts_and_hash", killed)
        with pytest.raises(RuntimeError, match="killed"):
            export_training.run(
                spark, lake, "stage1", "parquet", str(out), rows_per_shard=6, max_chars=8
            )
    assert sorted(s.name for s in out.glob("shard-*")) == [s.name for s in shards]
    assert not (out / "_manifest.json").exists()

    out = tmp_path / "swift"
    manifest = export_training.run(
        spark, lake, "stage1", "swift_jsonl", str(out), rows_per_shard=100, max_chars=8
    )
    lines = (out / "shard-00000.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == manifest["rows"] == len(EXPECTED)
    anchors = {texts[(r.anchor_id, r.anchor_lang, r.anchor_view)][:8] for r in rows.itertuples()}
    for line in lines:
        record = json.loads(line)
        assert record["messages"][0]["role"] == "user"
        assert record["messages"][0]["content"] in anchors
        assert (
            len(record["positive_messages"]) == 1
            and len(record["positive_messages"][0][0]["content"]) <= 8
        )
    assert json.loads(Path(out / "_manifest.json").read_text())["max_chars"] == 8


def test_an_export_that_loses_or_repeats_a_row_fails_without_a_manifest(
    spark, built, tmp_path, monkeypatch
):
    lake = private_copy(built[0], tmp_path)
    joined = export_training.export_rules.stage1_rows
    faults = {
        # a pair whose anchor view did not join its text, as if silver/views had lost it
        "lost": (lambda rows: rows.where("anchor_id != 'US-3-A1'"), r"did not join.*US-3-A1"),
        "repeated": (lambda rows: rows.unionByName(rows.limit(1)), r"rows were repeated"),
        # as many rows lost as repeated: the count matches, the rows do not
        "lost_and_repeated": (
            lambda rows: rows.where("anchor_id != 'US-3-A1'").unionByName(
                rows.where("anchor_id != 'US-3-A1'").limit(
                    rows.where("anchor_id = 'US-3-A1'").count()
                )
            ),
            r"did not join.*US-3-A1.* and rows were repeated",
        ),
    }
    for name, (fault, message) in faults.items():
        out = tmp_path / name
        monkeypatch.setattr(
            export_training.export_rules, "stage1_rows", lambda *a, f=fault: f(joined(*a))
        )
        with pytest.raises(
            ValueError, match=rf"wrote \d+ rows for the {len(EXPECTED)} of.*{message}"
        ):
            export_training.run(spark, lake, "stage1", "parquet", str(out))
        assert not (out / "_manifest.json").exists()


@pytest.mark.parametrize(
    ("option", "value", "valid_for", "refused_for"),
    [
        # --landscape restricts the PHAGE rows only; the pairs are restricted when built
        ("landscape", ("A",), "phage", ("stage1", "stage2", "stage2_validation")),
        # --recipe picks a Stage I pair set; the triplets and PHAGE rows have one each
        ("recipe", "r3", "stage1", ("stage2", "stage2_validation", "phage")),
    ],
)
def test_export_refuses_an_option_its_dataset_would_ignore(
    tmp_path, option, value, valid_for, refused_for
):
    out = tmp_path / "out"
    for dataset in refused_for:
        with pytest.raises(
            ValueError, match=rf"--{option} applies to --dataset {valid_for} only.*{dataset}"
        ):
            export_training.run(
                None, str(tmp_path / "lake"), dataset, "parquet", str(out), **{option: value}
            )
    assert not out.exists() and not (tmp_path / "lake").exists()


def test_a_second_seeded_draw_does_not_favour_big_families(spark):
    """The sample after --family-cap, and the taxonomy chain after its one member per
    family, drew by the very numbers of the first draw: a family with many rows hands on the
    smallest of many numbers, so big families (and their languages) crowded the rest out."""
    from spark_jobs.lib.pairs import cap_per_family, sample_pairs, taxonomy_pairs

    # 200 families of 45 zh-zh pairs and 2,000 of one ja-ja pair; one pair a family, then 220
    rows = [
        ("ABS-ABS", f"Z{f}-{i}", "zh", f"Z{f}-x{i}", "zh", f"FZ{f}")
        for f in range(200)
        for i in range(45)
    ]
    rows += [("ABS-ABS", f"J{f}", "ja", f"J{f}-x", "ja", f"FJ{f}") for f in range(2000)]
    pairs = spark.createDataFrame(
        rows,
        "pair_type string, anchor_id string, anchor_lang string, positive_id string, "
        "positive_lang string, family_id string",
    )
    capped = cap_per_family(pairs, 1, seed=13)
    sampled = sample_pairs(capped, {"ABS-ABS": 220}, {"ABS-ABS": 2200}, seed=13)
    zh = sampled.where("anchor_lang = 'zh'").count()
    assert sampled.count() == 220 and zh < 45  # 9% of the families: ~20; 150 before
    # one subclass: 100 families of 20 members and 1,000 of one; a chain of 50 links
    members = [(f"B{f}-{i}", f"FB{f}") for f in range(100) for i in range(20)]
    members += [(f"S{f}", f"FS{f}") for f in range(1000)]
    docs = spark.createDataFrame(
        [(p, fam, "en", "TAC", f"h{p}") for p, fam in members],
        "publication_number string, family_id string, lang string, view string, text_hash string",
    )
    patents = spark.createDataFrame(
        [(p, fam, ["A47G19/00"]) for p, fam in members],
        "publication_number string, family_id string, ipc_codes array<string>",
    )
    links = taxonomy_pairs(docs, patents, "TAX", 50, seed=13).toPandas()
    big = links.anchor_id.str.startswith("B").sum() + links.positive_id.str.startswith("B").sum()
    assert len(links) == 50 and big < 25  # 9% of the families: ~9 of 100 sides; 63 before


def test_cross_language_pairs_join_members_of_different_languages(spark):
    """Paper 4.2 pairs "different-language members". Pairs were made whenever two members'
    texts differed in language: two Chinese members that both carry an English translation,
    and an EP member's German claims with a US member's English ones, were cross-language
    pairs of same-language members."""
    from spark_jobs.lib.pairs import family_pairs

    keys = spark.createDataFrame(
        [
            ("CN-5-A", "F5", "zh", "ABS", "a"),
            ("CN-5-A", "F5", "en", "ABS", "b"),
            ("CN-5-B", "F5", "zh", "ABS", "c"),
            ("CN-5-B", "F5", "en", "ABS", "d"),
            ("JP-5-A", "F5", "ja", "ABS", "e"),
            ("EP-6-B1", "F6", "en", "ABS", "f"),
            ("EP-6-B1", "F6", "de", "ABS", "g"),
            ("US-6-B2", "F6", "en", "ABS", "h"),
        ],
        "publication_number string, family_id string, lang string, view string, text_hash string",
    )
    patents = spark.createDataFrame(
        [
            ("CN-5-A", "zh"),
            ("CN-5-B", "zh"),
            ("JP-5-A", "ja"),
            ("EP-6-B1", "en"),
            ("US-6-B2", "en"),
        ],
        "publication_number string, primary_lang string",
    )
    got = {
        (r.anchor_id, r.anchor_lang, r.positive_id, r.positive_lang)
        for r in family_pairs(keys, patents, "ABS-ABS", "ABS").collect()
    }
    # the Chinese members with the Japanese one, in either of their languages; nothing else
    assert got == {
        ("CN-5-A", "zh", "JP-5-A", "ja"),
        ("CN-5-A", "en", "JP-5-A", "ja"),
        ("CN-5-B", "zh", "JP-5-A", "ja"),
        ("CN-5-B", "en", "JP-5-A", "ja"),
    }


def test_rows_tied_on_the_seeded_order_are_written_in_one_order(spark, tmp_path):
    """Rows sort by a seeded number of ~2^31 values: about two ties a 100,000-row shard. Tied
    rows kept the order the input arrived in (another shuffle partitioning, a rewritten
    table), so the same rows and seed gave other shard bytes and another training order."""
    from spark_jobs.lib import export as export_rules
    from spark_jobs.lib.sampling import uniform

    keys = ("recipe", "pair_type", "anchor_id", "anchor_lang", "positive_id", "positive_lang")
    tied = ["CN-39308-A", "CN-49056-A"]  # the same number for seed 13
    rows = [("xembed", "ABS-CLAIM", i, "zh", i, "zh", f"文本 {i}", f"正文 {i}") for i in tied]
    columns = [*keys, "anchor_text", "positive_text"]
    numbers = spark.createDataFrame(rows, columns).select(uniform(13, *keys)).collect()
    assert len({r[0] for r in numbers}) == 1
    for fmt in ("parquet", "swift_jsonl"):
        written = []
        for order in (rows, rows[::-1]):
            out = tmp_path / f"{fmt}-{len(written)}"
            frame = spark.createDataFrame(order, columns).repartition(2)
            shards = export_rules.write_shards(spark, frame, str(out), fmt, 100_000, 13, keys)
            written.append((out / shards[0]["file"]).read_bytes())
        assert written[0] == written[1], fmt
