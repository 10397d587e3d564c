"""Training recipes (build_pairs --recipe r3 | r4 | qaecter, --match-volume-of) on hand-built
data with known answers, and their properties on a generated Google-Patents corpus."""

from datetime import date

import pandas as pd
import pytest
from deltalake import DeltaTable

from lake import read_pandas, write_table
from schemas import table
from spark_jobs import build_pairs, export_training
from spark_jobs.lib.pairs import signal_quotas
from tests.conftest import copy_lake, private_copy, views_frame

pytestmark = pytest.mark.spark
# the tests on this module's shared lakes (`base`, `built`) run in one worker, which builds
# them once; the test on the session lake stays in that lake's group (tests/conftest.py)
SHARED_LAKES = pytest.mark.xdist_group("recipes")

# publication, family, lang, IPC codes, publication date
PATENTS = [
    ("P1", "F1", "en", ["A61K 9/00", "B65D 1/00"], "2020-01-01"),
    ("P1J", "F1", "ja", ["A61K 9/00"], "2020-02-01"),
    ("P2", "F2", "en", ["A61K 31/00"], "2021-03-01"),
    ("P3", "F3", "en", ["A61K 9/10"], "2022-01-01"),
    ("P4", "F4", "en", ["B65D 5/00"], "2019-01-01"),
    ("P5", "F5", "en", ["H04L 1/00"], "2025-06-01"),  # published after the cutoff
    ("P6", "F6", "en", ["H04L 5/00"], "2020-01-01"),
    ("P9", "F9", "en", ["A61K 1/00"], "2020-01-01"),  # an evaluation family
]
# citing, cited, letters (resolved unless the cited number is unknown)
CITATIONS = [
    ("P2", "P1", "X"),
    ("P1", "P2", "A"),  # the same pair in the other direction: one pair
    ("P3", "P4", "Y"),
    ("P3", "P1", None),  # no category: not a signal
    ("P4", "P1J", "A"),
    ("P6", "P5", "X"),  # P5 is published after the cutoff
    ("P2", "P9", "X"),  # P9's family is excluded
    ("P1", "P1J", "X"),  # one family
    ("P3", "XX-404", "X"),  # not in the corpus
]
SECTIONS = ("TITLE", "ABS", "CLAIM", "FIC", "DESC", "TAC")


@pytest.fixture(scope="module")
def base(spark, tmp_path_factory):
    """The hand-built corpus, no pairs yet; tests that write take a `private_copy`."""
    lake = str(tmp_path_factory.mktemp("recipes") / "lake")
    views = [
        (pn, fam, lang, view, f"{view} text of {pn} ({lang})")
        for pn, fam, lang, _, _ in PATENTS
        for view in SECTIONS
    ]
    write_table(spark, views_frame(spark, views), lake, "silver/views")
    patents = [
        (
            pn,
            fam,
            None,
            pn[:2],
            None,
            None,
            date.fromisoformat(day),
            None,
            codes[0][0],
            codes,
            [],
            [lang],
            lang,
        )
        for pn, fam, lang, codes, day in PATENTS
    ]
    write_table(
        spark,
        spark.createDataFrame(patents, table("silver/patents").spark_schema()),
        lake,
        "silver/patents",
    )
    known = {p[0] for p in PATENTS}
    citations = [
        (
            citing,
            i,
            cited,
            None,
            None,
            letters,
            "SEA",
            "X" in (letters or ""),
            "Y" in (letters or ""),
            "A" in (letters or ""),
            cited in known,
            None,
        )
        for i, (citing, cited, letters) in enumerate(CITATIONS)
    ]
    write_table(
        spark,
        spark.createDataFrame(citations, table("bronze/citations").spark_schema()),
        lake,
        "bronze/citations",
    )
    write_table(
        spark,
        spark.createDataFrame([("F9", ["P9"])], table("silver/excluded_families").spark_schema()),
        lake,
        "silver/excluded_families",
    )
    return lake


def pairs_of(lake: str, recipe: str) -> pd.DataFrame:
    frame = DeltaTable(f"{lake}/gold/stage1_pairs").to_pandas()
    return frame[frame.recipe == recipe]


def keys(frame: pd.DataFrame, pair_type: str) -> set:
    rows = frame[frame.pair_type == pair_type]
    return set(zip(rows.anchor_id, rows.positive_id, strict=True))


@pytest.fixture(scope="module")
def built(spark, base, tmp_path_factory):
    """`base` with r3, r4 (seed 3) and qaecter built once, in that order, for tests to read."""
    lake = private_copy(base, tmp_path_factory.mktemp("built"))
    for recipe in ("r3", "r4", "qaecter"):
        build_pairs.run(spark, lake, recipe=recipe, seed=3)
    return lake


TRAINING = {"P1", "P1J", "P2", "P3", "P4", "P5", "P6"}  # every patent but the evaluation family's
# (citing anchor, cited positive) of the X/Y/A citations that make pairs
CITATION_PAIRS = {("P2", "P1"), ("P3", "P4"), ("P4", "P1J")}


@SHARED_LAKES
def test_r3_pairs_each_abstract_with_its_first_independent_claim(built):
    """R3 "pairs each patent abstract with its first independent claim" (paper 001, section
    2); it held TITLE-ABS, ABS-CLAIM and CLAIM-DESC pairs too, and the matched control with
    it."""
    r3 = pairs_of(built, "r3")
    assert set(r3.signal) == {"cross_section"} and set(r3.pair_type) == {"ABS-FIC"}
    assert keys(r3, "ABS-FIC") == {(p, p) for p in TRAINING}
    assert (r3.anchor_view == "ABS").all() and (r3.positive_view == "FIC").all()
    assert len(r3) == len(TRAINING)
    assert (r3.anchor_lang == r3.positive_lang).all() and (
        r3.family_id == r3.positive_family_id
    ).all()


@SHARED_LAKES
def test_r4_adds_taxonomy_and_citation_pairs(spark, built, tmp_path):
    r4 = pairs_of(built, "r4")
    assert len(pairs_of(built, "r3")) == 7  # r3's partition is left alone (r4, qaecter after it)
    # citations: resolved X/Y/A, other families, both before the cutoff; the citing patent is
    # the anchor (it was the smaller number: P1 "retrieved" the P2 that cites it), and P1 and
    # P2 citing each other give one pair, anchored on the later published P2
    assert keys(r4, "CITATION") == CITATION_PAIRS
    codes = {pn: {c[:4] for c in ipc} for pn, _, _, ipc, _ in PATENTS}
    family = {pn: fam for pn, fam, *_ in PATENTS}
    taxonomy = keys(r4, "TAXONOMY")
    # A61K: one member of each of F1, F2, F3 chained -> 2 pairs; B65D: F1, F4 -> 1; H04L -> 1
    assert len(taxonomy) == 4
    for a, b in taxonomy:
        assert codes[a] & codes[b] and family[a] != family[b] and "P9" not in (a, b)
    assert ("P5", "P6") in taxonomy
    cross = r4[r4.signal.isin(["taxonomy", "citation"])]
    assert (cross.anchor_view == "TAC").all() and (
        cross.family_id != cross.positive_family_id
    ).all()
    assert len(r4) == 7 + 4 + 3
    stats = DeltaTable(f"{built}/gold/stage1_stats").to_pandas()
    by_signal = stats[stats.recipe == "r4"].groupby("signal").n_pairs.sum().to_dict()
    assert by_signal == {"cross_section": 7, "taxonomy": 4, "citation": 3}
    # the cap holds per subclass; the same seed gives the same pairs
    lake = private_copy(built, tmp_path)
    build_pairs.run(spark, lake, recipe="r4", seed=3, taxonomy_cap=1)
    assert len(keys(pairs_of(lake, "r4"), "TAXONOMY")) == 3
    build_pairs.run(spark, lake, recipe="r4", seed=3)
    assert keys(pairs_of(lake, "r4"), "TAXONOMY") == taxonomy


@SHARED_LAKES
def test_citation_pairs_respect_an_explicit_cutoff(spark, base, tmp_path):
    lake = private_copy(base, tmp_path)
    build_pairs.run(spark, lake, recipe="qaecter", eval_cutoff="2021-01-01")
    qaecter = pairs_of(lake, "qaecter")
    assert keys(qaecter, "CITATION") == {("P4", "P1J")}  # P2, P3 published after 2021-01-01


@SHARED_LAKES
def test_qaecter_citations_and_multi_view_self_alignment(built):
    """QaECTER: citation pairs and views of the same patent (paper 001, section 2); it held
    cross-language family pairs too, which neither paper describes."""
    q = pairs_of(built, "qaecter")
    assert keys(q, "CITATION") == CITATION_PAIRS
    for pair_type in ("ABS-CLAIM", "ABS-DESC", "CLAIM-DESC"):
        assert keys(q, pair_type) == {(p, p) for p in TRAINING}
    assert set(q.signal) == {"citation", "cross_section"}
    assert len(q) == 3 + 3 * 7


@SHARED_LAKES
def test_matched_volume_is_exact_and_proportional_across_signals(
    spark, base, built, tmp_path, capsys
):
    with pytest.raises(FileNotFoundError, match="gold/stage1_pairs"):
        build_pairs.run(
            spark, private_copy(base, tmp_path, "empty"), recipe="r4", match_volume_of="r3"
        )
    lake = private_copy(built, tmp_path)
    metrics = build_pairs.run(spark, lake, recipe="r4", match_volume_of="r3", seed=5)
    control = pairs_of(lake, "r4-matched-r3")
    assert len(control) == len(pairs_of(lake, "r3")) == metrics["matched_volume"] == 7
    full = pairs_of(lake, "r4")
    counts = full.groupby("pair_type").size().to_dict()
    signal_of = dict(zip(full.pair_type, full.signal, strict=False))
    assert control.groupby("pair_type").size().to_dict() == signal_quotas(counts, signal_of, 7)
    assert len(pairs_of(lake, "r4")) == 14  # the full recipe stays
    err = capsys.readouterr().err
    assert "signal taxonomy" in err and "total" in err and "7" in err
    stats = DeltaTable(f"{lake}/gold/stage1_stats").to_pandas()
    assert stats[stats.recipe == "r4-matched-r3"].n_pairs.sum() == 7
    # a smaller recipe cannot be the control of a larger one
    with pytest.raises(ValueError, match="fewer"):
        build_pairs.run(spark, lake, recipe="r3", match_volume_of="r4")
    # r3 rebuilt after its control (here inside a landscape): the control matches nothing any
    # more, and its export was accepted as if it did
    build_pairs.run(spark, lake, recipe="r3", landscape=("A",))
    assert len(pairs_of(lake, "r3")) == 4
    with pytest.raises(ValueError, match=r"'r4-matched-r3' holds 7 pairs but 'r3' now holds 4"):
        export_training.run(
            spark, lake, "stage1", "parquet", str(tmp_path / "c"), recipe="r4-matched-r3"
        )
    build_pairs.run(spark, lake, recipe="r4", match_volume_of="r3", seed=5)
    manifest = export_training.run(
        spark, lake, "stage1", "parquet", str(tmp_path / "c"), recipe="r4-matched-r3"
    )
    assert manifest["rows"] == 4


def test_the_same_two_texts_under_two_pair_types_are_one_pair(spark):
    """Two patents citing each other that are also taxonomy neighbours gave one CITATION and
    one TAXONOMY row of the same two TACs: that pair trained twice."""
    from spark_jobs.lib.pairs import PAIR_COLUMNS, different_texts, group_by_texts

    def row(pair_type, signal, anchor, positive):
        keys = (anchor, "en", "TAC", positive, "en", "TAC", f"F{anchor}", f"F{positive}")
        return ("r4", pair_type, signal, *keys, f"h{anchor}", f"h{positive}")

    rows = [
        row("TAXONOMY", "taxonomy", "P1", "P2"),
        row("CITATION", "citation", "P2", "P1"),
        row("TAXONOMY", "taxonomy", "P3", "P4"),
    ]
    columns = [*PAIR_COLUMNS, "anchor_hash", "positive_hash"]
    grouped = group_by_texts(spark.createDataFrame(rows, columns))
    kept = {(r.pair_type, r.anchor_id, r.copies) for r in grouped.collect()}
    assert kept == {("CITATION", "P2", 2), ("TAXONOMY", "P3", 1)}
    assert different_texts(grouped).count() == 2


def test_signal_quotas_are_exact_per_signal_then_per_type():
    counts = {"A": 10, "B": 10, "T": 5, "C": 5}
    signal_of = {"A": "cross_section", "B": "cross_section", "T": "taxonomy", "C": "citation"}
    q = signal_quotas(counts, signal_of, 9)
    assert sum(q.values()) == 9 and q["A"] + q["B"] in (5, 6) and q["T"] + q["C"] in (3, 4)


@SHARED_LAKES
def test_export_of_a_recipe_names_both_families(spark, built, tmp_path):
    lake = private_copy(built, tmp_path)
    manifest = export_training.run(
        spark, lake, "stage1", "parquet", str(tmp_path / "r4"), recipe="r4"
    )
    assert manifest["recipe"] == "r4" and manifest["rows"] == 14
    rows = pd.read_parquet(tmp_path / "r4")
    cited = rows[rows.pair_type == "CITATION"]
    assert all(len(f) == 2 for f in cited.families)
    assert all(len(f) == 1 for f in rows[rows.signal == "cross_section"].families)
    with pytest.raises(ValueError, match="no pairs of recipe 'r4-matched-r3'"):
        export_training.run(
            spark, lake, "stage1", "parquet", str(tmp_path / "q"), recipe="r4-matched-r3"
        )


def test_recipes_on_a_generated_google_patents_corpus(spark, pipeline, tmp_path):
    """Every citation pair is a resolved X/Y/A citation across families, every taxonomy pair
    shares a subclass across families, no pair touches an excluded family, the matched volume
    is exact, and the data-quality suite passes."""
    from expectations.run import validate

    lake = copy_lake(pipeline, tmp_path)
    build_pairs.run(spark, lake, recipe="r3")
    build_pairs.run(spark, lake, recipe="r4", match_volume_of="r3")
    build_pairs.run(spark, lake, recipe="r4")
    build_pairs.run(spark, lake, recipe="qaecter")
    pairs = read_pandas(lake, "gold/stage1_pairs", spark)
    patents = read_pandas(lake, "silver/patents", spark).set_index("publication_number")
    citations = read_pandas(lake, "bronze/citations", spark)
    excluded = set(read_pandas(lake, "silver/excluded_families", spark).family_id)
    cited = citations[citations.resolved & (citations.is_x | citations.is_y | citations.is_a)]
    links = set(zip(cited.citing, cited.cited, strict=True))
    for r in pairs[pairs.signal == "citation"].itertuples():
        assert (r.anchor_id, r.positive_id) in links or (r.positive_id, r.anchor_id) in links
        assert r.family_id != r.positive_family_id
        assert max(patents.publication_date[[r.anchor_id, r.positive_id]]) < date(2025, 1, 1)
    for r in pairs[pairs.signal == "taxonomy"].itertuples():
        a = {c[:4] for c in patents.ipc_codes[r.anchor_id]}
        b = {c[:4] for c in patents.ipc_codes[r.positive_id]}
        assert a & b and r.family_id != r.positive_family_id
    named = set(patents.family_id[pairs.anchor_id]) | set(patents.family_id[pairs.positive_id])
    assert not named & excluded
    assert len(pairs[pairs.recipe == "r4-matched-r3"]) == len(pairs[pairs.recipe == "r3"])
    for recipe in ("r4", "qaecter"):
        assert set(pairs[pairs.recipe == recipe].signal) >= {"citation", "cross_section"}
    results = validate(spark, lake, ["gold/stage1_pairs", "gold/stage1_stats"], "dq-recipes")
    failed = [r for r in results if not r["success"]]
    assert not failed, failed
