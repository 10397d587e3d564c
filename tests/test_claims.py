import random

import pytest

from spark_jobs.lib.claims import (
    first_independent_claim,
    parse_references,
    references,
    split_claims,
)
from spark_jobs.lib.sample import plan as sample_plan
from spark_jobs.lib.sample.claims_plan import claim_plan
from spark_jobs.lib.sample.render import render_patent


def deps(text, lang=None):
    return [(c.number, c.depends_on) for c in split_claims(text, lang)]


def test_english_claims_with_single_or_and_range_dependencies():
    text = (
        "1. A cup comprising a handle.\n2. The cup of claim 1, wherein the handle is 3.5 mm thick.\n"
        "3. The cup according to claim 1 or 2, further comprising a lid.\n"
        "4. The cup as claimed in any one of claims 1 to 3, wherein the lid is glass.\n"
        "5. A method of using the cup of any of the preceding claims."
    )
    assert deps(text, "en") == [(1, ()), (2, (1,)), (3, (1, 2)), (4, (1, 2, 3)), (5, (1, 2, 3, 4))]


def test_english_claims_inline_without_line_breaks():
    text = "1. A cup. 2. The cup of claim 1. 3. The cup of claims 1, 2 and 2."
    assert deps(text) == [(1, ()), (2, (1,)), (3, (1, 2))]


def test_decimal_numbers_are_not_claim_markers():
    text = "1. A plate 2.5 mm thick and 3.0 mm wide. 2. The plate of claim 1, 2.5 mm long."
    claims = split_claims(text, "en")
    assert [(c.number, c.depends_on) for c in claims] == [(1, ()), (2, (1,))]
    assert claims[0].text == "A plate 2.5 mm thick and 3.0 mm wide."


def test_chinese_claims_with_ranges_and_alternatives():
    text = (
        "1. 一种杯子，其特征在于，包括杯体。\n2. 根据权利要求1所述的杯子，其特征在于，还包括把手。\n"
        "3. 根据权利要求1或2所述的杯子，其特征在于，还包括杯盖。\n"
        "4. 根据权利要求1-3中任一项所述的杯子。\n5. 根据权利要求1至4中任一项所述的杯子。\n"
        "6. 根据权利要求2、4所述的杯子。"
    )
    assert deps(text, "zh") == [
        (1, ()),
        (2, (1,)),
        (3, (1, 2)),
        (4, (1, 2, 3)),
        (5, (1, 2, 3, 4)),
        (6, (2, 4)),
    ]


def test_japanese_claims_with_full_width_markers_and_ranges():
    text = (
        "【請求項１】\nカップ本体を備えるカップ。\n【請求項２】\n取っ手をさらに備える、請求項１に記載のカップ。\n"
        "【請求項３】\n請求項１又は２に記載のカップ。\n【請求項４】\n請求項１～３のいずれか一項に記載のカップ。\n"
        "【請求項５】\n請求項２乃至４のいずれか一項に記載のカップ。"
        # the wave dash (U+301C), as JIS texts write "to": NFKC leaves it, it was no range
        "【請求項６】\n請求項１〜３のいずれか一項に記載のカップ。"
        # ないし is 乃至 written in kana: "claims 1 to 3", not "claim 1 or 3"
        "【請求項７】\n請求項１ないし３のいずれか一項に記載のカップ。"
    )
    assert deps(text, "ja") == [
        (1, ()),
        (2, (1,)),
        (3, (1, 2)),
        (4, (1, 2, 3)),
        (5, (2, 3, 4)),
        (6, (1, 2, 3)),
        (7, (1, 2, 3)),
    ]
    assert split_claims(text, "ja")[0].text == "カップ本体を備えるカップ。"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # "any preceding claim" (GB/EP drafting) and "one of the preceding claims" were read as
        # no reference at all: the claim counted as independent (ICLAIMS, FIC) with no legal edge
        (
            "1. A cup. 2. The cup of claim 1. 3. A cup according to any preceding claim. "
            "4. A cup according to one of the preceding claims. 5. The cup of the preceding claim.",
            [(1, ()), (2, (1,)), (3, (1, 2)), (4, (1, 2, 3)), (5, (4,))],
        ),
        (
            "1. 一种杯子。2. 根据前述权利要求中任一项所述的杯子。3. 如前述任一项权利要求所述的杯子。",
            [(1, ()), (2, (1,)), (3, (1, 2))],
        ),
        (
            "【請求項１】カップ。【請求項２】請求項１に記載のカップ。"
            "【請求項３】前述の請求項のいずれか一項に記載のカップ。",
            [(1, ()), (2, (1,)), (3, (1, 2))],
        ),
    ],
    ids=["en", "zh", "ja"],
)
def test_references_to_every_preceding_claim(text, expected):
    assert deps(text) == expected


@pytest.mark.parametrize(
    "phrase",
    [
        "Device according to one or more of the preceding claims.",
        "Device of any one of the claims above.",
        "Vorrichtung nach einem oder mehreren der vorhergehenden Ansprüche.",
        "Vorrichtung nach einem der vorangegangenen Ansprüche.",
        "Dispositif selon n'importe laquelle des revendications précédentes.",
        "前記請求項のいずれか一項に記載の装置。",
        "前記の請求項の何れかに記載の装置。",
    ],
)
def test_common_wordings_of_every_preceding_claim(phrase):
    """EP, DE, FR and JP drafting: the claim was taken for independent (ICLAIMS, FIC) and
    lost its legal edges."""
    assert parse_references(phrase, 4) == (1, 2, 3)


def test_a_reference_range_costs_nothing_beyond_the_claims_before_it():
    """A range "claims 1 to 10000000" (a typo, a planted record) was expanded in full: a minute and
    400 MB of the curate UDF for one claim. Measured in memory: the list is the cost."""
    import tracemalloc

    tracemalloc.start()
    try:
        assert parse_references("The cup of claims 1 to 2000000 or 2.", 4) == (1, 2, 3)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000, peak


@pytest.mark.parametrize(
    ("lang", "text"),
    [
        (
            "ko",
            "1. 컵. 2. 제1항에 있어서, 손잡이를 포함하는 컵. 3. 제1항 또는 제2항에 있어서, 컵. "
            "4. 청구항 1 내지 3 중 어느 한 항에 있어서, 컵. 5. 제2항 및 제4항에 있어서, 컵. "
            "6. 선행하는 항 중 어느 한 항에 있어서, 컵.",
        ),
        (
            "ko",
            "【청구항 1】\n컵.\n【청구항 2】\n제1항에 있어서, 손잡이를 포함하는 컵.\n"
            "【청구항 3】\n제1항 또는 제2항에 있어서, 컵.\n"
            "【청구항 4】\n청구항 1 내지 3 중 어느 한 항에 있어서, 컵.\n"
            "【청구항 5】\n제2항 및 제4항에 있어서, 컵.\n"
            "【청구항 6】\n선행하는 항 중 어느 한 항에 있어서, 컵.",
        ),
        (
            "de",
            "1. Becher. 2. Becher nach Anspruch 1. 3. Becher nach Anspruch 1 oder 2. "
            "4. Becher nach einem der Ansprüche 1 bis 3. 5. Becher nach Anspruch 2 und 4. "
            "6. Becher nach einem der vorhergehenden Ansprüche.",
        ),
        (
            "fr",
            "1. Tasse. 2. Tasse selon la revendication 1. 3. Tasse selon la revendication 1 ou 2. "
            "4. Tasse selon l'une quelconque des revendications 1 à 3. "
            "5. Tasse selon les revendications 2 et 4. "
            "6. Tasse selon l'une quelconque des revendications précédentes.",
        ),
        (
            "es",
            "1. Taza. 2. Taza según la reivindicación 1. 3. Taza según la reivindicación 1 o 2. "
            "4. Taza según cualquiera de las reivindicaciones 1 a 3. "
            "5. Taza según las reivindicaciones 2 y 4. "
            "6. Taza según cualquiera de las reivindicaciones anteriores.",
        ),
        (
            "pt",
            "1. Copo. 2. Copo de acordo com a reivindicação 1. "
            "3. Copo de acordo com a reivindicação 1 ou 2. "
            "4. Copo de acordo com qualquer uma das reivindicações 1 a 3. "
            "5. Copo de acordo com as reivindicações 2 e 4. "
            "6. Copo de acordo com qualquer uma das reivindicações anteriores.",
        ),
        (
            "it",
            "1. Tazza. 2. Tazza secondo la rivendicazione 1. "
            "3. Tazza secondo la rivendicazione 1 o 2. "
            "4. Tazza secondo una qualsiasi delle rivendicazioni da 1 a 3. "
            "5. Tazza secondo le rivendicazioni 2 e 4. "
            "6. Tazza secondo una qualsiasi delle rivendicazioni precedenti.",
        ),
    ],
    ids=["ko", "ko-kipo", "de", "fr", "es", "pt", "it"],
)
def test_claims_in_languages_beyond_the_papers_three(lang, text):
    # Google Patents holds Korean, German, French, Spanish, ... claims too; their references
    # were not recognised, so every claim was independent and the claim graph had no edges
    assert deps(text, lang) == [
        (1, ()),
        (2, (1,)),
        (3, (1, 2)),
        (4, (1, 2, 3)),
        (5, (2, 4)),
        (6, (1, 2, 3, 4, 5)),
    ]


def test_taiwanese_and_ordinal_chinese_references():
    # Taiwan's claims name claim N "申請專利範圍第N項" (since 2013 also 請求項N); Chinese claims
    # sometimes read "权利要求第1项": both counted as no reference (independent claims)
    text = (
        "1. 一種杯子。2. 如申請專利範圍第1項所述之杯子。3. 如申請專利範圍第1項或第2項所述之杯子。"
        "4. 如申請專利範圍第1至3項中任一項所述之杯子。5. 如請求項1所述之杯子。"
        "6. 根据权利要求第5项所述的杯子。"
    )
    assert deps(text) == [(1, ()), (2, (1,)), (3, (1, 2)), (4, (1, 2, 3)), (5, (1,)), (6, (5,))]
    assert references("如申請專利範圍第1項或第2項所述", 3) == [("申請專利範圍第1項或第2項", (1, 2))]


def test_a_reference_is_reported_once_as_written():
    # claim_graph's evidence: "claim 2" inside "claim 1 or claim 2" was a second reference
    assert references("The cup of claim 1 or claim 2.", 3) == [("claim 1 or claim 2", (1, 2))]
    assert references("제1항 또는 제2항에 있어서", 3) == [("제1항 또는 제2항", (1, 2))]
    # a list connector that only starts like another ("a" of "1 a 3" in "and") still joins
    assert references("The cup of claims 1 and 3.", 4) == [("claims 1 and 3", (1, 3))]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "1.一种方法，其特征在于，包括以下步骤：1)获取数据；2)处理数据；3)输出结果。"
            "2.根据权利要求1所述的方法，其中所述数据为图像。3.根据权利要求2所述的方法。",
            [
                (1, (), "一种方法，其特征在于，包括以下步骤：1)获取数据；2)处理数据；3)输出结果。"),
                (2, (1,), "根据权利要求1所述的方法，其中所述数据为图像。"),
                (3, (2,), "根据权利要求2所述的方法。"),
            ],
        ),
        (
            "1. A composition comprising: 1. water; 2. salt; and 3. pepper.\n"
            "2. The composition of claim 1, wherein the salt is sea salt.\n"
            "3. The composition of claim 2.",
            [
                (1, (), "A composition comprising: 1. water; 2. salt; and 3. pepper."),
                (2, (1,), "The composition of claim 1, wherein the salt is sea salt."),
                (3, (2,), "The composition of claim 2."),
            ],
        ),
        # a list in a later claim, and claims whose own markers use ')'
        (
            "1) A cup. 2) The cup of claim 1, made by: 1) molding; 2) firing; 3) glazing. "
            "3) The cup of claim 2.",
            [
                (1, (), "A cup."),
                (2, (1,), "The cup of claim 1, made by: 1) molding; 2) firing; 3) glazing."),
                (3, (2,), "The cup of claim 2."),
            ],
        ),
        # one item per line: the line break ends no item that ends in ";"
        (
            "1.一种方法，其特征在于，包括以下步骤：\n1）获取数据；\n2）处理数据；\n3）输出结果。\n"
            "2.根据权利要求1所述的方法，其中所述数据为图像。\n3.根据权利要求2所述的方法。",
            [
                (
                    1,
                    (),
                    "一种方法，其特征在于，包括以下步骤： 1）获取数据； 2）处理数据； 3）输出结果。",
                ),
                (2, (1,), "根据权利要求1所述的方法，其中所述数据为图像。"),
                (3, (2,), "根据权利要求2所述的方法。"),
            ],
        ),
        (
            "1. A method comprising:\n1) heating;\n2) cooling, and\n3) drying.\n"
            "2. The method of claim 1.",
            [
                (1, (), "A method comprising: 1) heating; 2) cooling, and 3) drying."),
                (2, (1,), "The method of claim 1."),
            ],
        ),
    ],
    ids=["zh-steps", "en-items", "list-in-claim-2", "zh-item-lines", "en-item-lines"],
)
def test_a_list_numbered_inside_a_claim_is_not_taken_for_claims(text, expected):
    # the list's markers were read as the next claims: the first independent claim (FIC)
    # ended at its first item and the real claims ran together in a later one
    claims = split_claims(text)
    assert [(c.number, c.depends_on, c.text) for c in claims] == expected


def test_claims_keep_their_text_as_written():
    # markers and references are read in the NFKC form (１ -> 1), but the claims (silver/claims,
    # the FIC view, ICLAIMS) were that form too: "，" became "," and "（ＡＢＣ）" "(ABC)"
    text = "【請求項１】\nカップ（ＡＢＣ）。\n【請求項２】\n請求項１に記載のカップ、容量１０ｍｌ。"
    assert [(c.number, c.text, c.depends_on) for c in split_claims(text, "ja")] == [
        (1, "カップ（ＡＢＣ）。", ()),
        (2, "請求項１に記載のカップ、容量１０ｍｌ。", (1,)),
    ]
    zh = "1．一种杯子，容量为１０ｍｌ。\n2．根据权利要求１所述的杯子。"
    assert [c.text for c in split_claims(zh, "zh")] == [
        "一种杯子，容量为１０ｍｌ。",
        "根据权利要求１所述的杯子。",
    ]
    # a character whose normal form is longer (㎏ -> kg, ℃ -> °C) moves every later one; the
    # claims are still found in the text as written. One ℃ in claim 2 turned claim 1 (the
    # FIC view) into its normal form: "，" became ","
    moved = "1. 重量1㎏的杯子。2. 根据权利要求1所述的杯子。"
    assert [(c.text, c.depends_on) for c in split_claims(moved, "zh")] == [
        ("重量1㎏的杯子。", ()),
        ("根据权利要求1所述的杯子。", (1,)),
    ]
    celsius = (
        "1．一种杯子，包括把手（A）。\n2．根据权利要求１所述的杯子，耐热100℃，重1㎏。\n3．盖。"
    )
    assert [(c.text, c.depends_on) for c in split_claims(celsius, "zh")] == [
        ("一种杯子，包括把手（A）。", ()),
        ("根据权利要求１所述的杯子，耐热100℃，重1㎏。", (1,)),
        ("盖。", ()),
    ]
    # one character composed (e + U+0301 -> é) and one expanded (㎏ -> kg): the same length,
    # but the places moved, so the normal form again
    balanced = "1. A cafe\u0301 cup. 2. A cup of 1㎏, of claim 1."
    assert [c.text for c in split_claims(balanced, "en")] == [
        "A caf\u00e9 cup.",
        "A cup of 1kg, of claim 1.",
    ]
    assert split_claims("カップ（ＡＢＣ）", "ja")[0].text == "カップ（ＡＢＣ）"  # no numbering


def test_cancelled_claims_are_no_claims():
    # a US publication of a continuation begins "1-20. (canceled)": the whole text was one
    # claim 1 ("-20. (canceled) 21. A method ..."), which became the first independent claim
    text = (
        "What is claimed is:\n1.-20. (Canceled)\n21. A method comprising heating.\n"
        "22. The method of claim 21, wherein cooling.\n23. (canceled)\n"
        "24. The method of claim 21 or 23."
    )
    claims = split_claims(text, "en")
    assert [(c.number, c.text, c.depends_on) for c in claims] == [
        (21, "A method comprising heating.", ()),
        (22, "The method of claim 21, wherein cooling.", (21,)),
        (24, "The method of claim 21 or 23.", (21, 23)),
    ]
    assert first_independent_claim(claims).number == 21
    assert split_claims("1-20. (cancelled)", "en") == []


def test_a_cancelled_range_inside_the_claims_and_status_labels():
    """US claim listings cancel ranges inside the claims too ("3-5. (canceled)") and label
    claims with their status ("(withdrawn)", "(new)", "(currently amended)"). The range was
    no marker, so claim 6 onwards vanished into claim 2's text, and a withdrawn claim took
    the references of the claims it swallowed; the labels were kept as claim text."""
    text = (
        "1. A battery comprising an anode.\n2. The battery of claim 1, wherein lithium.\n"
        "3-5. (canceled)\n6. The battery of claim 2, with a separator.\n"
        "7. (withdrawn) A method of making a battery.\n8.-10. (Cancelled)\n"
        "11. (new) The battery of claim 1, with a case.\n"
        "12. (Withdrawn - Currently Amended) The method of claim 7, wherein heating.\n"
        "13 to 14. [deleted]\n15. (previously presented) The battery of claim 6."
    )
    claims = split_claims(text, "en")
    assert [(c.number, c.text, c.depends_on) for c in claims] == [
        (1, "A battery comprising an anode.", ()),
        (2, "The battery of claim 1, wherein lithium.", (1,)),
        (6, "The battery of claim 2, with a separator.", (2,)),
        (7, "A method of making a battery.", ()),
        (11, "The battery of claim 1, with a case.", (1,)),
        (12, "The method of claim 7, wherein heating.", (7,)),
        (15, "The battery of claim 6.", (6,)),
    ]
    # a range in a claim's text is no cancellation: claim 3 follows it
    sized = split_claims("1. A cup.\n2. The cup of claim 1, sized 3-5. 3. The cup of claim 2.")
    assert [(c.number, c.depends_on) for c in sized] == [(1, ()), (2, (1,)), (3, (2,))]


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        (
            "【請求項１】\nカップ。\n【請求項２】\n（削除）\n【請求項３】\n請求項１に記載のカップ。",
            "ja",
        ),
        ("1. 一种杯子。\n2.（删除）\n3. 根据权利要求1所述的杯子。", "zh"),
        ("1. 一種杯子。\n2. （刪除）。\n3. 如申請專利範圍第1項所述之杯子。", "zh"),
        ("청구항 1\n컵.\n청구항 2\n삭제\n청구항 3\n제1항에 있어서, 컵.", "ko"),
    ],
    ids=["ja", "zh-hans", "zh-hant", "ko"],
)
def test_a_claim_deleted_in_its_own_language_is_no_claim(text, lang):
    """Japanese, Chinese and Korean publications mark a deleted claim "（削除）", "（删除）",
    "（刪除）", "삭제" where English ones write "(canceled)": it was kept as an independent
    claim whose text was the label."""
    claims = split_claims(text, lang)
    assert [(c.number, c.depends_on) for c in claims] == [(1, ()), (3, (1,))]
    assert not any("除" in c.text or "삭제" in c.text for c in claims)
    # a range deleted inside the claims, as "3-5. (canceled)" is in English
    ranged = split_claims("1. 一种杯子。\n2-3.（删除）\n4. 根据权利要求1所述的杯子。", "zh")
    assert [(c.number, c.depends_on) for c in ranged] == [(1, ()), (4, (1,))]
    # the word inside a claim's text deletes nothing
    kept = split_claims("1. 一种方法。\n2. 根据权利要求1所述的方法，删除文件。", "zh")
    assert [c.number for c in kept] == [1, 2]


@pytest.mark.parametrize(
    "text",
    [
        # a number in unnumbered claims opened "claim 1" there: the text before it was lost
        "A cup with a length of 1. The cup is blue.",
        # a claims text ending in a reference gave no claim at all
        "A cup with a handle. The cup of claim 1.",
    ],
)
def test_a_number_inside_claim_text_opens_no_claim_and_loses_nothing(text):
    assert [(c.number, c.text) for c in split_claims(text, "en")] == [(1, text)]


@pytest.mark.parametrize(
    "text",
    [
        "What is claimed is: 1. A cup. 2. The cup of claim 1.",
        "What is claimed is 1. A cup. 2. The cup of claim 1.",
        "CLAIMS\n1. A cup.\n2. The cup of claim 1.",
        "CUP\n1. A cup.\n2. The cup of claim 1.",  # a title line
    ],
)
def test_a_heading_before_claim_1_is_no_claim_text(text):
    assert [(c.number, c.text) for c in split_claims(text, "en")] == [
        (1, "A cup."),
        (2, "The cup of claim 1."),
    ]


@pytest.mark.parametrize(
    "text, lang",
    [
        ("Claim 1. A cup.\nClaim 2. The cup of claim 1.", "en"),
        ("Claim 1: A cup. Claim 2: The cup of claim 1.", "en"),
        ("Claim 1\nA cup.\nClaim 2\nThe cup of claim 1.", "en"),
        ("Anspruch 1. A cup. Anspruch 2. The cup of claim 1.", "de"),
        ("청구범위\n청구항 1\nA cup.\n청구항 2\nThe cup of claim 1.", "ko"),
    ],
)
def test_claim_headings_belong_to_the_marker(text, lang):
    # the heading word of the next claim ended the previous one ("A cup. Claim"), and a
    # colon or a line break after the number was no marker at all
    assert [(c.number, c.text, c.depends_on) for c in split_claims(text, lang)] == [
        (1, "A cup.", ()),
        (2, "The cup of claim 1.", (1,)),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "[請求項1] カップ。[請求項2] 請求項1に記載のカップ。",
        "［請求項１］カップ。［請求項２］請求項１に記載のカップ。",
        "[청구항 1]\n컵。\n[청구항 2]\n제1항에 있어서, 컵。",
        "[Claim 1]\nA cup.\n[Claim 2]\nThe cup of claim 1.",
    ],
)
def test_bracketed_markers_in_square_brackets(text):
    # plain-text and translated copies of JP and KR claims write 【請求項1】 as [請求項1] or
    # [Claim 1]: the whole text was one claim 1
    claims = split_claims(text)
    assert [(c.number, c.depends_on) for c in claims] == [(1, ()), (2, (1,))]
    assert not any("[" in c.text or "［" in c.text for c in claims)


@pytest.mark.parametrize("named", ["FIG. 2", "Fig. 2", "figure 2", "Formula 2", "step 2", "图 2"])
def test_a_number_after_a_figure_or_step_is_no_claim(named):
    text = f"1. A cup as in {named}. 2. The cup of claim 1."
    assert [(c.number, c.text) for c in split_claims(text, "en")] == [
        (1, f"A cup as in {named}."),
        (2, "The cup of claim 1."),
    ]
    # a sentence ending in such a word still ends before the next claim
    ends = "1. A cup. 2. The cup of claim 1, made in one step. 3. The cup of claim 2."
    assert [c.number for c in split_claims(ends, "en")] == [1, 2, 3]


def test_a_serial_comma_before_or_and_continues_the_list():
    # "claim 1, 2, or 3" (US drafting) read as claims 1 and 2
    assert parse_references("The method of claim 1, 2, or 3.", own_number=4) == (1, 2, 3)
    assert parse_references("The cup of claims 1, 2, and/or 3.", own_number=4) == (1, 2, 3)
    # not before a one-letter word: "a" is a range in es/pt/it ("1 a 3")
    assert parse_references("The device of claim 1, a 3-way valve.", own_number=4) == (1,)


def test_a_claim_ending_in_the_next_claims_number_is_not_cut_there():
    """In "wherein n is 1 or 2.\n2. The compound": the '2.' of the formula was taken for claim
    2's marker, so claim 1 (the FIC view) lost its end and claim 2 kept its marker."""
    text = (
        "1. A compound of formula (I), wherein n is 1 or 2.\n"
        "2. The compound of claim 1, wherein n is 2.\n"
        "3. The compound of claim 1, wherein n is 4.\n"
        "4. The compound of claim 3, wherein R is methyl."
    )
    claims = split_claims(text, "en")
    assert [(c.number, c.depends_on) for c in claims] == [(1, ()), (2, (1,)), (3, (1,)), (4, (3,))]
    assert [c.text for c in claims] == [
        "A compound of formula (I), wherein n is 1 or 2.",
        "The compound of claim 1, wherein n is 2.",
        "The compound of claim 1, wherein n is 4.",
        "The compound of claim 3, wherein R is methyl.",
    ]
    # inline claims: the marker after the sentence's end is the claim's
    inline = split_claims("1. A cup of size 1 or 2. 2. The cup of claim 1.", "en")
    assert [c.text for c in inline] == ["A cup of size 1 or 2.", "The cup of claim 1."]


def test_forward_and_self_references_are_ignored():
    assert parse_references("The cup of claim 3 or claim 2.", own_number=2) == ()


def test_unnumbered_claims_stay_one_independent_claim():
    claims = split_claims("A cup with a handle and a lid", "en")
    assert [(c.number, c.independent, c.text) for c in claims] == [
        (1, True, "A cup with a handle and a lid")
    ]
    assert split_claims("   ", "en") == [] and split_claims(None) == []


def test_first_independent_claim_skips_dependents():
    claims = split_claims("1. A cup. 2. The cup of claim 1. 3. A saucer.", "en")
    assert first_independent_claim(claims).number == 1
    assert [c.number for c in claims if c.independent] == [1, 3]


@pytest.mark.parametrize("lang", ["en", "zh", "ja"])
def test_generated_claims_parse_back_to_their_plan(lang):
    plan = sample_plan.build_plan(11, 120)
    for family in range(plan.n_families):
        inv = sample_plan.invention(plan, family)
        structure = claim_plan(inv, random.Random(family))
        text = render_patent(inv, structure, lang, random.Random(family + 1))["claims"]
        assert deps(text, lang) == [(c.number, c.parents) for c in structure], text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # a repeated claim set (an amendment after the original): the repeat stays in claim 1
        (
            "【請求項１】カップ。【請求項１】蓋付きカップ。【請求項２】請求項１のカップ。",
            [(1, "カップ。【請求項１】蓋付きカップ。", ()), (2, "請求項１のカップ。", (1,))],
        ),
        # a skipped number: the marker out of sequence stays in the claim before it
        (
            "【請求項１】A。【請求項３】C。【請求項２】B。",
            [(1, "A。【請求項３】C。", ()), (2, "B。", ())],
        ),
        # markers not starting at 1: no numbering recognised, the whole text is one claim
        (
            "【請求項２】請求項１のカップ。【請求項１】カップ。",
            [(1, "【請求項２】請求項１のカップ。【請求項１】カップ。", ())],
        ),
    ],
)
def test_japanese_markers_out_of_sequence_keep_numbers_unique_and_text_whole(text, expected):
    # silver/claims is keyed by claim number: a repeated 【請求項１】 gave two claims 1, which
    # failed the data-quality gate's key check and made claim_graph join claim 1 to itself
    claims = split_claims(text, "ja")
    assert [(c.number, c.text, c.depends_on) for c in claims] == expected
    assert "".join(c.text for c in claims).count("。") == text.count("。")
