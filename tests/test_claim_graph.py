"""silver/claim_graph: legal and technical edges from hand-written zh, en and ja claims, the
job on a generated corpus, its rerun, and the data-quality suite catching planted faults."""

import pytest

from lake import read_pandas
from spark_jobs import claim_graph as claim_graph_job
from spark_jobs.lib.claim_graph import edges, technical_terms
from spark_jobs.lib.claims import split_claims
from tests.conftest import copy_lake

EN = """1. A wind turbine rotor blade comprising a carbon fiber spar cap and a balsa core.
2. The rotor blade of claim 1, wherein the spar cap is pultruded.
3. The rotor blade according to any of the preceding claims, wherein the core is foam.
4. The rotor blade of claims 1 to 3, having a lightning receptor.
5. A method of manufacturing a wind turbine rotor blade with a carbon fiber spar cap,
comprising infusing resin into the balsa core.
6. A beverage dispenser with a refrigerated water tank."""

ZH = """1. 一种风力涡轮机转子叶片，包括碳纤维梁帽和轻木芯。
2. 根据权利要求1所述的转子叶片，其中所述梁帽是拉挤成型的。
3. 根据权利要求1或2所述的转子叶片，其中所述芯是泡沫。
4. 根据权利要求1至3中任一项所述的转子叶片，还包括避雷接收器。
5. 一种制造风力涡轮机转子叶片的方法，包括将树脂注入碳纤维梁帽和轻木芯。"""

JA = """【請求項１】炭素繊維スパーキャップとバルサコアとを備える風力タービンロータブレード。
【請求項２】前記スパーキャップが引抜成形される、請求項１に記載のロータブレード。
【請求項３】請求項１から２のいずれか一項に記載のロータブレード。
【請求項４】炭素繊維スパーキャップに樹脂を注入する風力タービンロータブレードの製造方法。"""


def graph(text, lang):
    claims = split_claims(text, lang)
    return {
        (e.src, e.dst, e.relation): e
        for e in edges([(c.number, c.text, c.depends_on) for c in claims])
    }


def test_english_legal_edges_with_ranges_and_any_preceding_claim():
    g = graph(EN, "en")
    legal = {k: e.evidence for k, e in g.items() if k[2] == "legal"}
    assert legal == {
        (2, 1, "legal"): "claim 1",
        (3, 1, "legal"): "any of the preceding claims",
        (3, 2, "legal"): "any of the preceding claims",
        (4, 1, "legal"): "claims 1 to 3",
        (4, 2, "legal"): "claims 1 to 3",
        (4, 3, "legal"): "claims 1 to 3",
    }
    assert all(e.weight == 1.0 for k, e in g.items() if k[2] == "legal")


def test_english_technical_edges_join_independent_claims_that_share_terms():
    g = graph(EN, "en")
    method = g[(5, 1, "technical")]  # the method claim restates claim 1's blade
    assert {"rotor", "blade", "carbon", "spar", "balsa"} <= set(method.evidence.split(", "))
    assert 0.2 <= method.weight <= 1
    # the dispenser shares nothing technical; a legal pair is never also a technical edge
    assert not [k for k in g if 6 in k[:2]]
    assert not {(s, d) for s, d, r in g if r == "technical"} & {
        (s, d) for s, d, r in g if r == "legal"
    }
    assert all(s > d for s, d, _ in g)


def test_german_edges_share_technical_words_not_boilerplate():
    # accented letters split words ("gehäuse" gave "geh"); German function words and claim
    # boilerplate ("einem", "nach", "anspruch", "vorrichtung") were shared "technical" terms
    text = (
        "1. Vorrichtung mit einem Gehäuse und einem Kühlkörper. "
        "2. Vorrichtung nach Anspruch 1, wobei das Gehäuse aus Aluminium besteht. "
        "3. Verfahren zum Betrieb einer Vorrichtung mit einem Lüfter. "
        "4. Verfahren zur Herstellung einer Vorrichtung mit einem Gehäuse und einem Kühlkörper."
    )
    g = graph(text, "de")
    assert g[(2, 1, "legal")].evidence == "Anspruch 1"
    assert g[(4, 1, "technical")].evidence == "gehäuse, kühlkörper"
    assert not [k for k in g if 3 in k[:2]]  # the fan shares only boilerplate with the others


@pytest.mark.parametrize(
    ("lang", "text"),
    [
        (
            "en",
            "1. A system comprising devices and portions.\n2. A method using devices and portions.",
        ),
        (
            "zh",
            "1. 一种系统，包括多个第一单元和多个第二单元。\n2. 一种方法，包括多个第一单元和多个第二单元。",
        ),
        (
            "ja",
            "【請求項１】複数の第一装置と複数の第二装置とを備えるシステム。\n"
            "【請求項２】複数の第一装置と複数の第二装置とを用いる方法。",
        ),
    ],
)
def test_ordinals_plurality_and_plural_boilerplate_make_no_technical_edge(lang, text):
    # "first units", "第一单元", "複数の第一装置" and "devices" were shared terms in Chinese,
    # Japanese and English plural forms while the same claims in German made no edge
    assert {k for k in graph(text, lang) if k[2] == "technical"} == set()


def test_russian_and_greek_claims_have_technical_terms():
    # Cyrillic and Greek letters made no word: these claims had no terms and no edge
    ru = (
        "1. Лопатка ротора ветряной турбины, содержащая углеродную балку и сердечник из бальзы.\n"
        "2. Способ изготовления лопатки ротора ветряной турбины, содержащей углеродную балку и "
        "сердечник из бальзы."
    )
    g = graph(ru, "ru")
    assert g[(2, 1, "technical")].evidence.split(", ") == sorted(
        ["ротора", "ветряной", "турбины", "углеродную", "балку", "сердечник", "бальзы"]
    )
    assert not {"содержащая", "способ"} & technical_terms(ru)
    el = "Πτερύγιο ανεμογεννήτριας με δοκό άνθρακα, σύμφωνα με την αξίωση 1."
    assert technical_terms(el) == {"πτερύγιο", "ανεμογεννήτριας", "δοκό", "άνθρακα"}


def test_chinese_legal_and_technical_edges():
    g = graph(ZH, "zh")
    legal = {k[:2]: e.evidence for k, e in g.items() if k[2] == "legal"}
    assert legal == {
        (2, 1): "权利要求1",
        (3, 1): "权利要求1或2",
        (3, 2): "权利要求1或2",
        (4, 1): "权利要求1至3",
        (4, 2): "权利要求1至3",
        (4, 3): "权利要求1至3",
    }
    assert g[(5, 1, "technical")].weight >= 0.5  # the method claim restates claim 1's blade
    claims = split_claims(ZH, "zh")
    shared = technical_terms(claims[4].text) & technical_terms(claims[0].text)
    assert {"叶片", "梁帽", "纤维", "木芯"} <= shared
    assert "所述" not in technical_terms(ZH) and "权利" not in technical_terms(ZH)


def test_taiwan_boilerplate_makes_no_technical_edge():
    # "申請專利範圍第1項所述之杯子" shared 申請, 專利, 範圍, 之杯 ... between any two dependent
    # claims of a Taiwan publication: a technical edge of weight 0.8 from boilerplate
    tw = (
        "1. 一種杯子，包括杯身及杯蓋。\n2. 如申請專利範圍第1項所述之杯子，其中杯蓋為紅色。\n"
        "3. 如申請專利範圍第1項所述之杯子，其特徵在於杯底為圓形。\n"
        "4. 如請求項1所述之杯子，其中杯身為白色。"  # the newer wording
    )
    g = graph(tw, "zh")
    assert {k for k in g if k[2] == "technical"} == set()
    assert {k[:2] for k in g if k[2] == "legal"} == {(2, 1), (3, 1), (4, 1)}
    terms = technical_terms(tw)
    assert not {"申請", "專利", "範圍", "之杯", "特徵", "一種"} & terms
    assert {"杯子", "杯蓋", "杯底"} <= terms


def test_japanese_legal_and_technical_edges():
    g = graph(JA, "ja")
    legal = {k[:2]: e.evidence for k, e in g.items() if k[2] == "legal"}
    assert legal == {(2, 1): "請求項1", (3, 1): "請求項1から2", (3, 2): "請求項1から2"}
    assert (4, 1, "technical") in g
    claims = split_claims(JA, "ja")
    shared = technical_terms(claims[3].text) & technical_terms(claims[0].text)
    assert {"スパーキャップ", "タービンロータブレード", "炭素", "繊維"} <= shared
    assert "請求" not in technical_terms(JA) and "前記" not in technical_terms(JA)


def test_thresholds_decide_technical_edges():
    claims = [
        (1, "A rotor blade with a spar cap.", ()),
        (2, "A rotor hub with a pitch bearing.", ()),
    ]
    assert not edges(claims)  # one shared term ("rotor") is below the default of two
    assert [(e.src, e.dst) for e in edges(claims, min_jaccard=0.1, min_shared=1)] == [(2, 1)]
    # a reference to a claim that does not exist is no edge
    assert edges([(1, "A cup.", ()), (3, "The cup of claim 2.", (2,))]) == []


@pytest.mark.spark
def test_the_job_builds_a_checked_graph_and_a_rerun_replaces_it(spark, pipeline, tmp_path):
    from expectations.run import validate

    lake = copy_lake(pipeline, tmp_path)
    metrics = claim_graph_job.run(spark, lake)
    rows = read_pandas(lake, "silver/claim_graph", spark)
    claims = read_pandas(lake, "silver/claims", spark)
    dependencies = {
        (r.publication_number, r.lang, r.claim_number, d)
        for r in claims.itertuples()
        for d in r.depends_on
    }
    legal = rows[rows.relation == "legal"]
    assert len(legal) == len(dependencies) == metrics["edges_legal"] > 0
    cols = ["publication_number", "lang", "src_claim", "dst_claim"]
    assert set(legal[cols].itertuples(index=False, name=None)) == dependencies
    assert metrics["edges_technical"] == (rows.relation == "technical").sum()
    key = ["publication_number", "lang", "src_claim", "dst_claim", "relation"]
    first = rows.sort_values(key).reset_index(drop=True)

    claim_graph_job.run(spark, lake)  # same input: same rows, not twice
    again = read_pandas(lake, "silver/claim_graph", spark).sort_values(key).reset_index(drop=True)
    assert first.equals(again)

    results = validate(spark, lake, ["silver/claim_graph"], "dq-claim-graph")
    assert [r for r in results if not r["success"]] == []


@pytest.mark.spark
def test_the_quality_suite_catches_planted_edges(spark, pipeline, tmp_path):
    from expectations.run import validate
    from lake import write_table

    lake = copy_lake(pipeline, tmp_path)
    claim_graph_job.run(spark, lake)
    claim = read_pandas(lake, "silver/claims", spark).iloc[0]
    key = (claim.publication_number, claim.family_id, claim.lang)
    planted = [  # a self-loop, a legal edge to a later claim, an edge from a missing claim
        (*key, 1, 1, "technical", 0.5, "self"),
        (*key, 1, 2, "legal", 1.0, "forward"),
        (*key, 99, 1, "technical", 0.5, "missing claim"),
    ]
    good = spark.read.format("delta").load(f"{lake}/silver/claim_graph")
    frame = good.unionByName(spark.createDataFrame(planted, good.schema))
    write_table(spark, frame, lake, "silver/claim_graph")
    results = validate(spark, lake, ["silver/claim_graph"], "dq-planted")
    failed = {r["column"] for r in results if r["critical"] and not r["success"]}
    assert {
        "no self-loop",
        "an edge points to an earlier claim",
        "both claims of an edge exist in silver/claims",
        "a legal edge is a dependency of silver/claims",
    } <= failed
