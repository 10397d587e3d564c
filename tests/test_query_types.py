"""Evaluation query types built in Spark, and the SumBasic summary, on hand-made patents."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from schemas import table
from spark_jobs.lib.query_types import query_texts
from spark_jobs.lib.summary import sentences, sumbasic, terms
from tests.conftest import views_frame


def test_sumbasic_by_hand():
    text = (
        "The battery electrode stores lithium. "
        "Weather was pleasant yesterday. "
        "A battery electrode coating protects lithium electrode surfaces. "
        "Nothing else matters here."
    )
    # 15 content terms: electrode 3, battery 2, lithium 2, nine others once ("nothing",
    # "else", "here" are stop words). electrode is the most probable; of the two sentences
    # holding it the first has the higher mean probability (0.533 / 4 > 0.867 / 7).
    assert sumbasic(text, "en", n_sentences=1) == "The battery electrode stores lithium."
    # then its terms are squared: the most probable terms are the singletons (1/15) of the
    # other sentences; the weather sentence (mean 1/15) beats the third (0.316 / 7) and ties
    # with the last, and the earlier wins; the summary keeps the order of the text
    assert sumbasic(text, "en", n_sentences=2) == (
        "The battery electrode stores lithium. Weather was pleasant yesterday."
    )
    assert sumbasic(text, "en", max_chars=20) == "The battery electrod"
    assert sumbasic("", "en") is None


def test_sentences_do_not_end_at_abbreviations():
    # "FIG." and "No." ended sentences: SUMMARY picked fragments such as "FIG." (its one term
    # "fig" is among a description's most frequent) and "3 is a section of the cell."
    text = (
        "[0005] FIG. 1 is a view of the cell. FIGS. 2A and 2B show the plate.\n"
        "[0006] See U.S. Pat. No. 5,123,456 for a known cell, e.g. a pouch cell. "
        "Smith et al. (2001) describe it. It works! Does it? Type A. The end."
    )
    assert sentences(text) == [
        "FIG. 1 is a view of the cell.",
        "FIGS. 2A and 2B show the plate.",
        "See U.S. Pat. No. 5,123,456 for a known cell, e.g. a pouch cell.",
        "Smith et al. (2001) describe it.",
        "It works!",
        "Does it?",
        "Type A.",
        "The end.",
    ]


def test_sentences_and_terms_in_chinese_and_japanese():
    assert sentences("[0001] 本发明涉及电池。电池包括电极！\n背景") == [
        "本发明涉及电池。",
        "电池包括电极！",
        "背景",
    ]
    assert sentences("【技術分野】\n【０００１】　本発明は電池に関する。") == [
        "【技術分野】",
        "本発明は電池に関する。",
    ]
    # Japanese punctuated "，．" (and the half-width ｡): one run of paragraphs before
    assert sentences("本発明は，電池に関する．電池は電極を含む｡正極") == [
        "本発明は，電池に関する．",
        "電池は電極を含む｡",
        "正極",
    ]
    assert terms("电池电极", "zh") == ["电池", "池电", "电极"]
    assert terms("The battery and its electrode", "en") == ["battery", "electrode"]
    assert sumbasic("电池包括电极。天气很好。电池电极涂层。", "zh", n_sentences=1) in (
        "电池包括电极。",
        "电池电极涂层。",
    )


def test_summary_sentences_keep_full_width_decimals_and_skip_headings():
    """０．５ｍｍ was cut at its point, and SUMMARY stitched "電極の厚さは０．５ｍｍ以上２．０ｍｍ
    である。" (dropping 以下) from the pieces; short headings won SumBasic's mean-probability
    pick ("A cup. TECHNICAL FIELD BACKGROUND")."""
    assert sentences(
        "電極の厚さは０．５ｍｍ以上２．０ｍｍ以下である。本発明は，電池に関する．"
    ) == [
        "電極の厚さは０．５ｍｍ以上２．０ｍｍ以下である。",
        "本発明は，電池に関する．",
    ]
    text = "A cup.\nTECHNICAL FIELD\nBACKGROUND\nKnown cups leak hot tea onto the table.\nSUMMARY"
    assert sumbasic(text, "en") == "A cup. Known cups leak hot tea onto the table."
    assert sumbasic("【発明の概要】\n本発明は電池に関する。", "ja") == "本発明は電池に関する。"
    assert sumbasic("TECHNICAL FIELD", "en") == "TECHNICAL FIELD"  # nothing else: kept


@pytest.mark.spark
def test_first_paragraph_of_run_on_cjk_and_related_application_descriptions(spark):
    """DESC1 of descriptions exported without line breaks took the paragraph after the first
    (the first ended in the next heading, so it looked unfinished) and leaked "SUMMARY"; the
    usual 12-17 character CN/JP first paragraph was under the 20-character minimum; and
    continuation, 371 and "based on" paragraphs were taken for the invention."""
    from spark_jobs.lib.query_types import first_paragraph

    cases = [
        (
            "TECHNICAL FIELD [0001] The present disclosure relates to a cup. BACKGROUND [0002] "
            "Known cups break easily when dropped in the kitchen. SUMMARY [0003] A cup.",
            "The present disclosure relates to a cup.",
        ),
        (
            "【技術分野】【０００１】本発明は、電池用電極に関する。【背景技術】【０００２】従来の電池"
            "用電極は、急速充電時に割れることがあった。",
            "本発明は、電池用電極に関する。",
        ),
        (
            "本发明涉及一种电池电极。\n背景技术\n现有的电池电极在快速充电时容易开裂。",
            "本发明涉及一种电池电极。",
        ),
        (
            "This is a continuation of U.S. application Ser. No. 16/123,456, filed Jan. 1, 2020."
            "\nThe present disclosure relates to drinking cups with lids.",
            "The present disclosure relates to drinking cups with lids.",
        ),
        (
            "This application is a 371 of International Application No. PCT/JP2020/001234 filed "
            "on Jan. 1, 2020.\nThe present disclosure relates to a vehicle control device.",
            "The present disclosure relates to a vehicle control device.",
        ),
        (
            "The present application is based on Japanese Patent Application No. 2020-123456 "
            "filed on Jan. 1, 2020, the contents of which are hereby incorporated.\n"
            "The present disclosure relates to a vehicle control device.",
            "The present disclosure relates to a vehicle control device.",
        ),
    ]
    frame = spark.createDataFrame([(i, d) for i, (d, _) in enumerate(cases)], "i int, d string")
    got = dict(frame.select("i", first_paragraph(F.col("d"))).collect())
    assert [got[i] for i in range(len(cases))] == [expected for _, expected in cases]


@pytest.mark.spark
def test_every_query_type_is_built_from_the_silver_tables(spark):
    views = views_frame(
        spark,
        [
            ("P1", "F1", "en", "TITLE", "Cup", 3),
            ("P1", "F1", "en", "ABS", "A cup holds tea.", 16),
            ("P1", "F1", "en", "CLAIM", "1. A cup.\n2. The cup of claim 1.\n3. A lid.", 40),
            (
                "P1",
                "F1",
                "en",
                "DESC",
                # headings of 20 characters or more were taken for the first paragraph
                "CROSS-REFERENCE TO RELATED APPLICATIONS\nField of the Invention\n"
                "[0001] The invention relates to cups for tea.\n[0002] More.",
                80,
            ),
            ("P1", "F1", "en", "TAC", "Cup\nA cup holds tea.\n1. A cup.", 30),
            ("P1", "F1", "en", "FIC", "A cup.", 6),
            ("P1", "F1", "zh", "ABS", "杯子。", 3),  # another language: not the query's
            ("P2", "F2", "ja", "ABS", "カップ。", 4),
            (
                "P2",
                "F2",
                "ja",
                "DESC",
                "【技術分野】\n【０００１】\n【特許文献１】特開２０１０－１２３４５６号公報\n"
                "【０００２】　本発明は、茶を入れる陶磁器製のカップと取っ手に関する。",
                40,
            ),
            ("P3", "F3", "zh", "ABS", "灯具。", 3),
            (
                "P3",
                "F3",
                "zh",
                "DESC",
                # without line breaks: its paragraph numbers start its paragraphs
                "技术领域 [0001] 本发明涉及一种LED灯具的散热结构和制造方法。[0002] 背景技术。",
                40,
            ),
            # the first paragraph of most US, CN and JP descriptions names related
            # applications, not the invention: DESC1 was that sentence
            ("P4", "F4", "en", "ABS", "A valve.", 8),
            (
                "P4",
                "F4",
                "en",
                "DESC",
                "CROSS-REFERENCE TO RELATED APPLICATIONS\n[0001] This application is a "
                "continuation of U.S. application Ser. No. 16/123,456, filed Jan. 2, 2019, "
                "which is incorporated herein by reference in its entirety.\n"
                "[0002] The entire contents of Japanese Patent Application No. 2018-1234 "
                "are incorporated herein by reference.\n"
                "[0003] Priority is claimed on Korean Patent Application No. 10-2018-1.\n"
                "BACKGROUND\n[0004] The present disclosure relates to valves for pipes.",
                80,
            ),
            ("P5", "F5", "zh", "ABS", "阀门。", 3),
            (
                "P5",
                "F5",
                "zh",
                "DESC",
                "相关申请的交叉引用\n本申请要求于2019年1月2日提交的中国专利申请201910001234.5的"
                "优先权，其全部内容通过引用结合于此。\n技术领域\n本发明涉及一种用于输送流体的管道的阀门及其制造方法。",
                40,
            ),
            ("P7", "F7", "ja", "ABS", "カップ．", 4),
            (
                "P7",
                "F7",
                "ja",
                "DESC",
                # punctuated "，．": its first paragraph, under 80 characters, was a heading
                "【技術分野】\n【０００１】本発明は，断熱層を有する飲料用のカップに関する．\n"
                "【背景技術】\n【０００２】従来，飲料用のカップとして，紙製の本体の外周に断熱層を"
                "設けたものが知られており，断熱層は発泡樹脂からなり，本体の外周面に接着剤によって"
                "接着されている（例えば，特許文献１を参照）．",
                40,
            ),
            ("P6", "F6", "ja", "ABS", "弁。", 2),
            (
                "P6",
                "F6",
                "ja",
                "DESC",
                "【０００１】本出願は、２０１９年１月２日に出願された日本国特許出願２０１９－１２３"
                "４号に基づく優先権を主張し、その内容を援用する。\n【技術分野】\n"
                "【０００２】本発明は、流体を輸送する配管用の弁およびその製造方法に関する。",
                40,
            ),
        ],
    )
    claims = spark.createDataFrame(
        [
            ("P1", "F1", "en", 3, "A lid.", True, []),
            ("P1", "F1", "en", 1, "A cup.", True, []),
            ("P1", "F1", "en", 2, "The cup of claim 1.", False, [1]),
        ],
        table("silver/claims").spark_schema(),
    )
    patents = spark.createDataFrame(
        [("P1", ["H01M10/05", "A47G19/00"], ["A47G19/2205", "H01M10/05"])],
        "publication_number string, ipc_codes array<string>, cpc_codes array<string>",
    )
    queries = spark.createDataFrame(
        [
            ("P1", "en"),
            ("P2", "ja"),
            ("P3", "zh"),
            ("P4", "en"),
            ("P5", "zh"),
            ("P6", "ja"),
            ("P7", "ja"),
        ],
        "publication_number string, lang string",
    )
    texts = query_texts(queries, views, claims, patents).collect()
    got = {r["view"]: r["text"] for r in texts if r["publication_number"] == "P1"}
    japanese = {r["view"]: r["text"] for r in texts if r["publication_number"] == "P2"}
    # JP paragraph numbers are full-width and in 【】: kept, DESC1 began with 【０００１】
    assert japanese["DESC1"] == "本発明は、茶を入れる陶磁器製のカップと取っ手に関する。"
    chinese = {r["view"]: r["text"] for r in texts if r["publication_number"] == "P3"}
    assert chinese["DESC1"] == "本发明涉及一种LED灯具的散热结构和制造方法。"  # "LED" is no heading
    assert got["TITLE"] == "Cup"
    assert got["TA"] == "Cup\nA cup holds tea."
    assert got["FIC"] == "A cup."
    assert got["ICLAIMS"] == "A cup.\nA lid."  # independent claims in claim order
    assert got["DESC1"] == "The invention relates to cups for tea."  # heading skipped
    desc1 = {r["publication_number"]: r["text"] for r in texts if r["view"] == "DESC1"}
    assert desc1["P4"] == "The present disclosure relates to valves for pipes."
    assert desc1["P5"] == "本发明涉及一种用于输送流体的管道的阀门及其制造方法。"
    assert desc1["P6"] == "本発明は、流体を輸送する配管用の弁およびその製造方法に関する。"
    assert desc1["P7"] == "本発明は，断熱層を有する飲料用のカップに関する．"
    assert got["TACD"] == "Cup\nA cup holds tea.\n1. A cup.\n" + got["DESC"]
    assert got["CODES"] == "H01M10/05 A47G19/00 A47G19/2205"  # IPC first, each once
    assert got["SUMMARY"] == sumbasic("A cup holds tea.\n" + got["DESC"], "en")
    assert {"ABS", "CLAIM", "DESC", "TAC"} <= set(got)


def test_the_evaluator_names_an_empty_query_set_and_a_missing_type():
    from evaluation.evaluate import select_query_types

    with pytest.raises(ValueError, match=r"no query at all: silver/eval_queries was empty"):
        select_query_types([], ["ABS"])
    queries = [{"view": "ABS", "id": 1}, {"view": "TAC", "id": 2}]
    with pytest.raises(ValueError, match=r"no query of type\(s\) \['TITLE'\] \(they hold \['ABS'"):
        select_query_types(queries, ["ABS", "TITLE"])
    # a corpus without descriptions: the remedy is the types held, not a rerun of prepare
    with pytest.raises(ValueError, match=r"no DESC queries\), so pass --query-types ABS,TAC;"):
        select_query_types(queries, ["ABS", "DESC", "TAC"])
    assert select_query_types(queries, ["TAC"]) == [{"view": "TAC", "id": 2}]
