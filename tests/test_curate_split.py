"""Curate (texts, views, claims, patents, families) and split (queries, exclusion, audit)."""

from datetime import date

import pytest

from spark_jobs.lib import curate as curation
from spark_jobs.lib import ingest as ingestion
from spark_jobs.lib import split as splitting
from spark_jobs.lib.leakage import LeakageError, audit_no_leakage
from tests.conftest import gp_record, lines_frame

pytestmark = pytest.mark.spark


def bronze(spark, records):
    parsed = ingestion.with_validation(ingestion.parse_google_patents(lines_frame(spark, records)))
    return ingestion.to_bronze_publications(parsed, "google_patents", "2026-01-01 00:00:00")


def test_best_text_prefers_complete_and_longest_entry_per_language(spark):
    record = gp_record(lang="zh")
    record["abstract_localized"] = [
        {"text": "长摘要被截断了的版本", "language": "zh", "truncated": True},
        {"text": "完整摘要", "language": "zh", "truncated": False},
        {"text": "English <b>abstract</b>\t text", "language": "en", "truncated": False},
    ]
    texts = {r["lang"]: r for r in curation.best_texts(bronze(spark, [record])).collect()}
    assert texts["zh"]["abstract"] == "完整摘要"
    assert texts["en"]["abstract"] == "English abstract text"
    assert texts["en"]["claims"] is None


def test_best_text_breaks_ties_by_length_then_position_and_skips_blank_entries(spark):
    record = gp_record(lang="en")
    record["claims_localized"] = [
        {"text": "1. Short.", "language": "en", "truncated": False},
        {"text": "1. Longest one.", "language": "en", "truncated": False},
        {"text": "1. Same size.", "language": "en", "truncated": False},
    ]
    record["description_localized"] = [
        {"text": "First <i>one</i>", "language": "en", "truncated": False},
        {"text": "Other one", "language": "en", "truncated": False},
        {"text": " <br> ", "language": "ja", "truncated": False},  # blank once cleaned
    ]
    rows = curation.best_texts(bronze(spark, [record])).collect()
    assert [r["lang"] for r in rows] == ["en"]
    assert rows[0]["claims"] == "1. Longest one."
    assert rows[0]["description"] == "First one"  # as long as the second: the earlier wins


def test_views_and_claim_graph(spark):
    record = gp_record(
        claims="1. A cup.\n2. The cup of claim 1.\n3. A saucer.", abstract="An abstract."
    )
    texts = curation.best_texts(bronze(spark, [record]))
    views = {r["view"]: r["text"] for r in curation.views(texts).collect()}
    assert set(views) == {"ABS", "CLAIM", "DESC", "TAC", "FIC", "TITLE"}
    assert views["TAC"] == "A title\nAn abstract.\n1. A cup.\n2. The cup of claim 1.\n3. A saucer."
    assert views["FIC"] == "A cup."
    graph = sorted(
        (r["claim_number"], r["independent"], list(r["depends_on"]))
        for r in curation.claims(texts).collect()
    )
    assert graph == [(1, True, []), (2, False, [1]), (3, True, [])]


def test_title_and_description_only_has_no_tac(spark):
    record = gp_record(abstract="", claims="")
    texts = curation.best_texts(bronze(spark, [record]))
    # a title beside the description is a TITLE view; without abstract or claims, no TAC
    assert sorted(r["view"] for r in curation.views(texts).collect()) == ["DESC", "TITLE"]


def test_patents_section_languages_and_primary_language(spark):
    record = gp_record(
        "CN-1-A",
        lang="zh",
        ipc=[
            {"code": "G06F17/00", "inventive": False, "first": False},
            {"code": "h01m10/05", "inventive": True, "first": True},
        ],
    )
    record["abstract_localized"].append(
        {"text": "English abstract", "language": "en", "truncated": False}
    )
    # without an IPC code the main CPC code gives the section (such queries fell out of every
    # IPC-section macro, the paper's headline numbers); CPC's Y section is no IPC section
    cpc = [
        {"code": "Y02E60/10", "inventive": False, "first": False},
        {"code": "B60L58/12", "inventive": True, "first": True},
    ]
    cpc_only = gp_record("US-2-A1", family="200", ipc=[], cpc=cpc)
    y_only = gp_record("US-3-A1", family="300", ipc=None, cpc=cpc[:1])
    pubs = bronze(spark, [record, cpc_only, y_only])
    views = curation.views(curation.best_texts(pubs))
    rows = {r["publication_number"]: r for r in curation.patents(pubs, views).collect()}
    row = rows["CN-1-A"]
    assert (row["ipc_section"], list(row["languages"]), row["primary_lang"]) == (
        "H",
        ["en", "zh"],
        "zh",
    )
    assert (rows["US-2-A1"]["ipc_section"], rows["US-3-A1"]["ipc_section"]) == ("B", None)
    cn = pubs.where("publication_number = 'CN-1-A'")
    fam = curation.families(curation.patents(cn, views)).first()
    assert (fam["family_id"], list(fam["members"]), fam["n_members"]) == ("100", ["CN-1-A"], 1)


def test_the_primary_language_is_one_the_patent_has_text_in(spark):
    """The query language came from the first raw claims entry even when that entry cleaned
    to nothing: a patent with no text in it became a query nobody could score, and a training
    patent lost its Stage II query views."""
    record = gp_record("JP-1-A", family="100", lang="ja", claims="1. 装置。")
    record["claims_localized"].insert(0, {"text": "<br/>", "language": "en", "truncated": False})
    english = gp_record("EP-2-A", family="200", lang="en")
    english["claims_localized"] = [{"text": " <p> </p>", "language": "de", "truncated": False}]
    pubs = bronze(spark, [record, english])
    views = curation.views(curation.best_texts(pubs))
    rows = {r["publication_number"]: r for r in curation.patents(pubs, views).collect()}
    assert (list(rows["JP-1-A"]["languages"]), rows["JP-1-A"]["primary_lang"]) == (["ja"], "ja")
    # no claims left in any language: the abstract's language
    assert (list(rows["EP-2-A"]["languages"]), rows["EP-2-A"]["primary_lang"]) == (["en"], "en")


def test_text_of_unicode_blanks_only_makes_no_view(spark):
    """Java's \\S without the Unicode flag counts an em space as text: a patent whose texts
    were only U+2003 kept views of nothing and was never quarantined."""
    blank = gp_record("US-5-A1", family="500", abstract="\u2003\u2003", claims="\u2003")
    blank["title_localized"][0]["text"] = "\u2002"
    blank["description_localized"][0]["text"] = "\u3000\u205f"
    pubs = bronze(spark, [blank, gp_record("US-6-A1", family="600")])
    views = curation.views(curation.best_texts(pubs))
    assert {r["publication_number"] for r in views.collect()} == {"US-6-A1"}
    lost = curation.without_views(pubs, views, "2026-01-01 00:00:00").collect()
    assert [(r["record_id"], r["reason"]) for r in lost] == [("US-5-A1", "no_text_after_cleaning")]


def test_ipc_codes_are_trimmed_once_in_bronze(spark):
    """Codes kept their blanks in bronze: evaluation trimmed them (subclass H04L) but the
    taxonomy pairs and PHAGE did not (' H04'), so one patent had two subclasses."""
    from spark_jobs.lib.pairs import ipc_subclasses

    ipc = [
        {"code": " H04L 29/06", "inventive": True, "first": True},
        {"code": "\tG06F 17/00 ", "inventive": False, "first": False},
    ]
    pubs = bronze(spark, [gp_record("US-7-A1", family="700", ipc=ipc)])
    views = curation.views(curation.best_texts(pubs))
    row = (
        curation.patents(pubs, views)
        .select("ipc_codes", "ipc_section", ipc_subclasses("ipc_codes").alias("subclasses"))
        .first()
    )
    assert list(row["ipc_codes"]) == ["H04L 29/06", "G06F 17/00"]
    assert (row["ipc_section"], list(row["subclasses"])) == ("H", ["G06F", "H04L"])


def test_publications_without_views_are_quarantined(spark):
    pubs = bronze(spark, [gp_record("US-1-A1"), gp_record("US-2-A1")])
    views = curation.views(curation.best_texts(pubs)).where("publication_number = 'US-1-A1'")
    lost = curation.without_views(pubs, views, "2026-01-01 00:00:00").collect()
    assert [(r["record_id"], r["reason"]) for r in lost] == [("US-2-A1", "no_text_after_cleaning")]


def split_inputs(spark):
    patents = spark.createDataFrame(
        [
            ("Q1", "F1", date(2025, 3, 1), "zh", "H"),  # query: X citation to another family
            ("Q1b", "F1", date(2024, 5, 1), "en", "H"),  # its family member (before cutoff)
            ("Q2", "F2", date(2025, 6, 1), "en", "A"),  # only cites its own family: no query
            ("Q2b", "F2", date(2023, 6, 1), "en", "A"),
            ("Q3", "F3", date(2025, 2, 1), "ja", "B"),  # Y citation only: no query
            ("P1", "F9", date(2019, 1, 1), "en", "H"),
            ("T1", "F8", date(2024, 12, 31), "en", "G"),  # filed before the cutoff: training
            ("Q4", "F4", date(2025, 4, 1), "en", "C"),  # cites a patent without a TAC: no query
            ("P2", "F7", date(2018, 1, 1), "en", "C"),  # a title and description only
        ],
        "publication_number string, family_id string, filing_date date, primary_lang string, ipc_section string",
    )
    citations = spark.createDataFrame(
        [
            ("Q1", "P1", "F9", True, True),
            ("Q2", "Q2b", "F2", True, True),
            ("Q3", "P1", "F9", False, True),
            ("T1", "P1", "F9", True, True),
            ("Q1", "US-9-A", None, True, False),
            ("Q4", "P2", "F7", True, True),
        ],
        "citing string, cited string, cited_family_id string, is_x boolean, resolved boolean",
    )
    # the candidate collection: every TAC view, P2 has none
    collection = patents.where("publication_number != 'P2'").select("publication_number")
    return patents, citations, collection


def test_eval_queries_need_cutoff_and_an_x_citation_in_the_collection_outside_the_family(spark):
    patents, citations, collection = split_inputs(spark)
    queries = splitting.eval_queries(patents, citations, date(2025, 1, 1), collection).collect()
    assert [
        (q["publication_number"], q["lang"], list(q["x_cited"]), q["n_x_cited"]) for q in queries
    ] == [("Q1", "zh", ["P1"], 1)]
    excluded = splitting.excluded_families(
        splitting.eval_queries(patents, citations, date(2025, 1, 1), collection)
    ).collect()
    assert [(r["family_id"], list(r["query_publication_numbers"])) for r in excluded] == [
        ("F1", ["Q1"])
    ]


def test_leakage_audit_catches_family_members_ids_and_arrays(spark):
    patents, citations, collection = split_inputs(spark)
    excluded = splitting.excluded_families(
        splitting.eval_queries(patents, citations, date(2025, 1, 1), collection)
    )
    clean = spark.createDataFrame(
        [("T1", "F8", ["P1"])], "anchor_id string, family_id string, negs array<string>"
    )
    report = audit_no_leakage(
        clean,
        "gold/x",
        patents,
        excluded,
        id_columns=("anchor_id",),
        family_columns=("family_id",),
        id_array_columns=("negs",),
    )
    assert report.leaks == 0 and report.rows_checked == 1
    for leaky in [("Q1b", "F8", ["P1"]), ("T1", "F1", ["P1"]), ("T1", "F8", ["P1", "Q1b"])]:
        frame = spark.createDataFrame([leaky], clean.schema)
        with pytest.raises(LeakageError, match="gold/x"):
            audit_no_leakage(
                frame,
                "gold/x",
                patents,
                excluded,
                id_columns=("anchor_id",),
                family_columns=("family_id",),
                id_array_columns=("negs",),
            )
