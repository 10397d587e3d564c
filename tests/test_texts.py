"""Curate's per-record text rules (spark_jobs.lib.texts): cleaning, best entry, claims."""

import random
import unicodedata

import pytest

from spark_jobs.lib import texts
from spark_jobs.lib.texts import clean_text, per_language, ranked_entries


def entry(text, language="en", truncated=False):
    return {"text": text, "language": language, "truncated": truncated}


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("An <b>old</b> cup", "An old cup"),
        # inequalities are text: claims and descriptions are full of them (they were cut out
        # as tags: "wherein 0.1<x<0.5 and y>2 mm" became "wherein 0.1 2 mm")
        ("wherein 0.1<x<0.5 and y>2 mm", "wherein 0.1<x<0.5 and y>2 mm"),
        ("T1<T2 and P1>P2", "T1<T2 and P1>P2"),
        ("a < b and c > d", "a < b and c > d"),
        ("式中，0<a≤1，b>0。", "式中，0<a≤1，b>0。"),
        ("x<a and y>b", "x<a and y>b"),  # a one-letter tag takes only name="value" attributes
        ("no closing < here", "no closing < here"),
        # markup: HTML and patent full-text XML tags with their attributes, comments
        # a tag inside a word or formula leaves no blank ("H 2 O" before); a block tag does
        ("H<sub>2</sub>O<br/>gas", "H2O gas"),
        ("Fe<SUP>3+</SUP> and <b>bold</b>face<p>next", "Fe3+ and boldface next"),
        # character references are decoded, after the tags: "&lt;b&gt;" is text
        ("x &lt; 5 &amp;&#160;100&deg;C, &#x3b1;-&lt;b&gt;", "x < 5 & 100°C, α-<b>"),
        ("AT&T and R&D; &unknown; stay", "AT&T and R&D; &unknown; stay"),
        ('see <claim-ref idref="CLM-00001">claim 1</claim-ref>', "see claim 1"),
        ("<td nowrap>cell</td><!-- a > b -->", "cell"),
        ('<a href="x.html">link</a>', "link"),
        ("tab\tand\u00a0nbsp\u3000ideographic   spaces", "tab and nbsp ideographic spaces"),
        ("line one  \n \x0b\n  line two", "line one\nline two"),
        # line breaks at the ends are stripped too: "<p>\n</p>" was a text of one line break,
        # an abstract that kept a title-only record out of quarantine
        ("  \n lead and trail \n  ", "lead and trail"),
        ("<p>\n</p>", ""),
        (" \r\n ", ""),
        ("para\u2028graph", "para\u2028graph"),  # not ASCII whitespace: left alone
        # the full-text XML's formulas (MathML), tables (CALS) and JP/CN/KR section tags
        (
            '<maths><math display="block"><mrow><mi>x</mi><mo>&lt;</mo><mn>2</mn></mrow>'
            "</math></maths>",
            "x < 2",
        ),
        (
            '<table><tgroup cols="2"><colspec colname="1"/><row><entry>A</entry>'
            "<entry>B</entry></row></tgroup></table>",
            "A B",
        ),
        ('<technical-field><p num="0001">Field.</p></technical-field>', "Field."),
        ("<citation-list><patent-literature>JP 1 A</patent-literature></citation-list>", "JP 1 A"),
        ("if T<mo and mo>T", "if T<mo and mo>T"),  # a name as short as a word needs values
        (" <br> ", ""),
    ],
)
def test_clean_text(raw, clean):
    assert clean_text(raw) == clean


@pytest.mark.parametrize(
    ("raw", "abstract"),
    [
        # the form of a Japanese abstract: its labels and the selected figure are no text
        (
            "【課題】熱伝導性に優れたカップを提供する。【解決手段】カップ本体と取っ手とを備え"
            "る。【選択図】図１",
            "熱伝導性に優れたカップを提供する。カップ本体と取っ手とを備える。",
        ),
        ("【要約】\n【目的】カップ。\n【構成】取っ手。\n【選択図】 なし", "カップ。\n取っ手。"),
        ("式【化１】で表される化合物。", "式【化１】で表される化合物。"),  # a formula stays
        ("A cup. 【選択図】 is text here, not the form's last line.", None),
    ],
)
def test_japanese_abstract_form_labels_are_dropped(raw, abstract):
    (row,) = per_language(None, [entry(raw, "ja")], None, None)
    assert row["abstract"] == (raw if abstract is None else abstract)
    # only abstracts: a description's 【0001】 or a claim's 【請求項１】 are read elsewhere
    (row,) = per_language(None, None, None, [entry(raw, "ja")])
    assert row["description"] == clean_text(raw)


@pytest.mark.parametrize(
    ("raw", "description"),
    [
        (
            "TECHNICAL FIELD\n[0001] The invention relates to cups.\n[0002] A cup holds tea.",
            "TECHNICAL FIELD\nThe invention relates to cups.\nA cup holds tea.",
        ),
        # exported without line breaks: each number still starts a paragraph
        (
            "技术领域 [0001] 本发明涉及电池。 [0002] 背景技术。",
            "技术领域\n本发明涉及电池。\n背景技术。",
        ),
        # JP: full-width numbers in 【】 on a line of their own; the labels are headings, kept
        (
            "【技術分野】\n【０００１】\n本発明は電池に関する。\n【背景技術】\n【０００２】　従来の電池。",
            "【技術分野】\n本発明は電池に関する。\n【背景技術】\n従来の電池。",
        ),
        ("[00123] Long documents number in five digits.", "Long documents number in five digits."),
        # the blanks around a number go with its line break, tabs and ideographic spaces too
        ("A cup. \t[0001]\t Tea. [0002]  ", "A cup.\nTea."),
        # fewer than four digits is no paragraph number: a reference, a formula, a list
        ("See [1] and [12] and [123]; x[0] = 2.", "See [1] and [12] and [123]; x[0] = 2."),
        ("[0001]", None),  # nothing but numbering: no description
    ],
)
def test_description_paragraph_numbers_become_line_breaks(raw, description):
    rows = per_language(None, None, None, [entry(raw, "ja")])
    assert [row["description"] for row in rows] == ([] if description is None else [description])


def test_blank_passes_skip_only_texts_they_would_not_change():
    """Both passes run only when a text holds what they replace: on every mix of blanks,
    line breaks and letters the guarded pass equals the pattern applied to the whole text."""
    pieces = [" ", "  ", "\t", "\r", "\f", "\x0b", "\n", "\u00a0", "\u3000", "\u2028", "a", "。"]
    rng = random.Random(11)
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 10)))
        assert texts._collapse_blanks(text) == texts._BLANKS.sub(" ", text), repr(text)
        assert texts._collapse_line_breaks(text) == texts._LINE_BREAK.sub("\n", text), repr(text)


def test_ranked_entries_complete_then_longest_then_earlier_and_no_blank():
    entries = [
        entry("a truncated but the longest text", truncated=True),
        entry("short"),
        entry("longer one"),
        entry("same size!"),  # as long as "longer one": the earlier wins
        entry(" <i> </i> "),  # blank once cleaned
        None,
        entry(None),
        entry("unsaid", truncated=None),  # an entry that does not say comes first
    ]
    assert [text for _, text in ranked_entries(entries)] == [
        "unsaid",
        "longer one",
        "same size!",
        "short",
        "a truncated but the longest text",
    ]
    assert ranked_entries(None) == []


def test_a_field_of_markup_and_line_breaks_is_no_entry():
    # its abstract of one line break gave a record with a title alone a TAC and a TITLE
    # view; "a title alone is no patent text" (quarantined as no_text_after_cleaning)
    (row,) = per_language([entry("Cup")], [entry("<p>\n</p>"), entry(" \r\n ")], None, None)
    assert row["title"] == "Cup" and row["abstract"] is None


def test_per_language_rows_in_first_seen_order_with_parsed_claims():
    rows = per_language(
        [entry("Titre", "fr"), entry("Title")],
        None,
        [entry("1. A cup.\n2. The cup of claim 1.")],
        [entry("説明", "ja")],
    )
    assert [r["lang"] for r in rows] == ["fr", "en", "ja"]
    fr, en, ja = rows
    assert (fr["title"], fr["abstract"], fr["claims"], fr["parsed_claims"]) == (
        "Titre",
        None,
        None,
        [],
    )
    assert en["claims"] == "1. A cup.\n2. The cup of claim 1."
    assert [
        (c["claim_number"], c["independent"], c["depends_on"]) for c in en["parsed_claims"]
    ] == [
        (1, True, []),
        (2, False, [1]),
    ]
    assert (ja["description"], ja["title"]) == ("説明", None)


def test_claims_numbered_only_in_their_xml_tags_keep_their_numbers():
    """EP full-text XML numbers its claims in <claim num="0002"> and not in the text: the
    tags became blanks and every claim merged into one independent claim 1."""
    ep = (
        '<claims id="claims01" lang="en"><claim id="c-en-01-0001" num="0001"><claim-text>A cup '
        'comprising a handle</claim-text></claim><claim id="c-en-01-0002" num="0002"><claim-text>'
        'The cup of <claim-ref idref="c-en-01-0001">claim 1</claim-ref>, wherein the handle is '
        'red.</claim-text></claim><claim id="c-en-01-0003" num="0003"><claim-text>A lid.'
        "</claim-text></claim></claims>"
    )
    # USPTO XML writes the number in the text too: it is not doubled
    us = (
        '<claims id="claims"><claim id="CLM-00001" num="00001"><claim-text>1. A cup comprising a '
        'handle.</claim-text></claim><claim id="CLM-00002" num="00002"><claim-text>2. The cup of '
        '<claim-ref idref="CLM-00001">claim 1</claim-ref>, wherein the handle is red.'
        "</claim-text></claim></claims>"
    )
    for text, expected in (
        (ep, [(1, "A cup comprising a handle", []), (2, "The cup of claim 1 , wherein the handle is red.", [1]), (3, "A lid.", [])]),
        (us, [(1, "A cup comprising a handle.", []), (2, "The cup of claim 1 , wherein the handle is red.", [1])]),
    ):  # fmt: skip
        row = per_language(None, None, [{"text": text, "language": "en", "truncated": False}], None)
        parsed = [(c["claim_number"], c["text"], c["depends_on"]) for c in row[0]["parsed_claims"]]
        assert parsed == expected


@pytest.mark.parametrize(
    "lang, first, second, fic",
    [
        ("zh", "1、一种杯子。", "2、根据权利要求1所述的杯子。", "一种杯子。"),
        ("ja", "１．カップ。", "２．請求項１に記載のカップ。", "カップ。"),
        ("ko", "청구항 1. 컵.", "청구항 2. 제1항에 있어서, 컵.", "컵."),
        ("en", "<b>1</b>. A cup.", "<b>2</b>. The cup of claim 1.", "A cup."),
    ],
)
def test_a_tagged_claim_numbered_its_own_way_is_not_numbered_again(lang, first, second, fic):
    """Only an ASCII "1." / "1)" counted as the text's own number: "1、", "１．", "청구항 1."
    and "<b>1</b>." got a second "1. " before them, and the claim texts kept their markers."""

    def tagged(n, body):
        return f'<claim id="c{n}" num="{n:04d}"><claim-text>{body}</claim-text></claim>'

    text = tagged(1, first) + tagged(2, second)
    row = per_language(None, None, [{"text": text, "language": lang, "truncated": False}], None)
    claims = row[0]["parsed_claims"]
    assert [(c["claim_number"], c["depends_on"]) for c in claims] == [(1, []), (2, [1])]
    assert claims[0]["text"] == fic and not row[0]["claims"].startswith("1. 1")


@pytest.mark.parametrize("blank", ["\u200b", "\ufeff", "&#8203;", "&shy;", "\u2060 \u200e", "\x07"])
def test_a_text_of_invisible_characters_only_is_no_text(blank):
    """A zero-width space, a BOM, a soft hyphen or a control character is not a space: an
    abstract of only such characters became ABS and TAC views instead of no text."""
    abstract = [{"text": f"<p>{blank}</p>", "language": "en", "truncated": False}]
    row = per_language(None, abstract, None, None)
    assert row == []


def test_the_same_text_decomposed_is_the_same_text():
    """NFD accents or kana (as some exports write them) hashed and paired as another text,
    and one decomposed kana made every parsed claim NFKC (１０㎜ read 10mm) unlike its view."""
    composed = "Die Tasse für Tee. 直径１０㎜のカップ、ガラス製。"
    decomposed = unicodedata.normalize("NFD", composed)
    assert decomposed != composed and clean_text(decomposed) == composed
    assert clean_text("Cafe&#769; au lait") == "Café au lait"
    claims = "【請求項１】" + unicodedata.normalize("NFD", "直径１０㎜のカップ、ガラス製。")
    row = per_language(None, None, [{"text": claims, "language": "ja", "truncated": False}], None)
    assert row[0]["parsed_claims"][0]["text"] in row[0]["claims"]


@pytest.mark.parametrize(
    "raw, clean",
    [
        ('<?BRFSUM description="Brief Summary" end="lead"?>A cup.', "A cup."),
        ('<?in-line-formulae description="In-line Formulae" end="lead"?>E=mc2', "E=mc2"),
        ("<mml:math><mml:mi>x</mml:mi><mml:mo>=</mml:mo><mml:mn>2</mml:mn></mml:math>", "x = 2"),
        ("<math><semantics><mpadded><mi>y</mi></mpadded></semantics></math>", "y"),
        ("as in <patcit num='1'><text>US 123 A</text></patcit>.", "as in US 123 A ."),
    ],
)
def test_processing_instructions_and_namespaced_or_mathml_tags_are_markup(raw, clean):
    """USPTO processing instructions, namespaced MathML (<mml:mi>) and the MathML and EP
    citation tags outside the list stayed in the views as text."""
    assert clean_text(raw) == clean


def test_claims_all_cancelled_are_no_claims_view():
    """'1-20. (canceled)' parses to no claim, yet became the CLAIM view and half the TAC."""
    row = per_language(
        [{"text": "Cup", "language": "en", "truncated": False}],
        [{"text": "A cup.", "language": "en", "truncated": False}],
        [{"text": "1-20. (canceled)", "language": "en", "truncated": False}],
        None,
    )[0]
    assert row["claims"] is None and row["parsed_claims"] == [] and row["abstract"] == "A cup."
