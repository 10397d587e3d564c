"""Curate's text rules, per bronze record: clean every localized entry, keep the best entry of
each field per language, split its claims.

Pure Python so every rule is unit-testable; curate applies :func:`per_language` to each
record in one Arrow UDF, which reads the texts once instead of once per SQL expression.

    >>> clean_text("An <b>old</b>\\t cup \\n\\n of tea ")
    'An old cup\\nof tea'
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Iterable, Mapping

from spark_jobs.lib.claims import split_claims

FIELDS = ("title", "abstract", "claims", "description")

# Markup: an HTML tag or one of the patent full-text XML (<b>, <sub>, <br/>, <claim-ref
# idref="CLM-00001">, <td nowrap>, <mml:math>) with its attributes, comments and processing
# instructions (<?in-line-formulae description="In-line Formulae" end="lead"?>). Anything else between
# '<' and '>' is text: claims are full of inequalities ("0.1<x<0.5 and y>2", "T1<T2 and
# P1>P2"), which a '<...>' pattern would cut out. A one-letter tag takes only attributes with
# a value, so "x<a and y>b" stays.
_VALUED = r"""\s*=\s*(?:"[^"<>]*"|'[^'<>]*'|[^\s"'<>=`]+)"""
_TAG = re.compile(
    rf"<!--.{{0,2000}}?-->|<\?[A-Za-z][^<>]{{0,2000}}?\?>|</?([A-Za-z][A-Za-z0-9]*(?:[-:][A-Za-z0-9]+)*)"
    rf"((?:\s+[\w:.-]+(?:{_VALUED})?){{0,64}})\s*/?>",
    re.DOTALL,
)
_VALUED_ATTRIBUTES = re.compile(rf"(?:\s+[\w:.-]+{_VALUED})*")
_MARKUP = frozenset(
    """a abbr b big blockquote br caption center cite code col colgroup dd del div dl dt em
    font h1 h2 h3 h4 h5 h6 hr i img ins kbd li ol p pre q s small span strike strong sub sup
    table tbody td tfoot th thead tr tt u ul abstract chem chemistry claim claim-ref
    claim-text claims crossref description description-of-drawings dl figref figure heading
    inline-formula maths nplcit o patcit sl smallcaps tables
    math mrow mi mo mn ms mtext msub msup msubsup mfrac msqrt mroot munder mover munderover
    mfenced mtable mtr mtd mstyle mspace semantics annotation annotation-xml mpadded mphantom
    menclose mmultiscripts mprescripts none maligngroup malignmark mlabeledtr msline
    text section sup2 sub2
    tgroup colspec spanspec row entry
    technical-field background-art disclosure summary-of-invention tech-problem tech-solution
    advantageous-effects description-of-embodiments embodiments-example mode-for-invention
    industrial-applicability reference-signs-list citation-list patent-literature
    non-patent-literature claim-statement""".split()
)
# MathML's token elements are names as short as words: like one-letter tags, taken for markup
# only with valued attributes or none ("if T<mo and mo>T" is text)
_WORDLIKE = frozenset("mi mo mn ms".split())


# Tags inside a word or formula: dropped without a blank, as a browser renders them
# ("H<sub>2</sub>O" is "H2O", "Fe<sup>3+</sup>" "Fe3+"); every other tag ends a word.
_INLINE = frozenset(
    "a abbr b big cite code del em font i ins kbd o q s small smallcaps span strike strong sub "
    "sup tt u".split()
)


def _drop_markup(match: re.Match) -> str:
    name, attributes = match.group(1, 2)
    if name is None:  # a comment or a processing instruction (USPTO's <?BRFSUM ...?>)
        return " "
    name = name.lower().rpartition(":")[2]  # a namespaced tag by its local name (<mml:mi>)
    markup = name in _MARKUP and (
        (len(name) > 1 and name not in _WORDLIKE)
        or _VALUED_ATTRIBUTES.fullmatch(attributes) is not None
    )
    if not markup:
        return match.group(0)
    return "" if name in _INLINE else " "


# Character references (&lt; &amp; &deg; &#176; &#xB0;), as texts with markup and some plain
# exports write them; an unknown name stays as written.
_REFERENCE = re.compile(r"&(?:[A-Za-z][A-Za-z0-9]{1,31}|#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6});")


_BLANKS = re.compile(r"[ \t\r\f\u00a0\u3000]+")
# Blank around a line break: ASCII whitespace only (as Java's \s), so a U+2028 or a U+0085
# stays in the text.
_LINE_BREAK = re.compile(r"[ \t\n\x0b\f\r]*\n[ \t\n\x0b\f\r]*")

# Python's re scans a character class ten times slower than ``str.__contains__`` scans for a
# substring, and both patterns above match at every single space or line break, where the
# replacement changes nothing. Each pass therefore runs only when a text holds what it would
# change (a test on all of a text, never on a part): nearly every text holds none of it.
_CHANGED_BY_BLANKS = ("  ", "\t", "\r", "\f", "\u00a0", "\u3000")
# without a tab, carriage return, form feed or vertical tab, a text's only blanks are spaces and
# line breaks, and a line break with a blank beside it is one of the first three
_CHANGED_BY_LINE_BREAK = ("\n ", " \n", "\n\n", "\t", "\r", "\f", "\x0b")


def _holds_any(text: str, substrings: tuple[str, ...]) -> bool:
    # a loop: ``any`` over a generator costs more than the tests themselves
    for substring in substrings:  # noqa: SIM110
        if substring in text:
            return True
    return False


def _collapse_blanks(text: str) -> str:
    """Each run of blanks within a line (spaces, tabs, no-break and ideographic spaces) as one
    space."""
    return _BLANKS.sub(" ", text) if _holds_any(text, _CHANGED_BY_BLANKS) else text


def _collapse_line_breaks(text: str) -> str:
    """Each run of ASCII whitespace holding a line break as one line break."""
    if "\n" in text and _holds_any(text, _CHANGED_BY_LINE_BREAK):
        return _LINE_BREAK.sub("\n", text)
    return text


# A claim numbered in its tag only (EP full-text XML: <claim num="0002"><claim-text>The cup
# ...), not in its text as USPTO XML also writes it ("<claim-text>2. The cup"): the number
# goes into the text, on a line of its own, before the tags are dropped.
# A text numbered its own way is not numbered again: "1、" (CN), "１．" (full width), "청구항 1."
# (KR), "<b>1</b>." (bold number) all hold a marker split_claims reads.
_OWN_NUMBER = (
    r"(?:<[^<>]*>\s*)*(?:(?:claim|請求項|청구항)\s*)?[0-9０-９]{1,5}\s*(?:</?[A-Za-z][^<>]*>\s*)*"
    r"[.)．、]"
)
_TAGGED_CLAIM = re.compile(
    r"""<claim\b[^<>]*?\bnum\s*=\s*["']0*([1-9]\d{0,4})["'][^<>]*>"""
    rf"((?>\s*(?:<claim-text\b[^<>]*>\s*)?))(?!{_OWN_NUMBER})",  # atomic: no backing off
    re.IGNORECASE,
)


# Characters that show nothing: format and control characters (zero-width space, BOM, word
# joiner, direction marks, soft hyphen, C0/C1 controls) and Hangul fillers. A text of only
# these and blanks (an exported "<p>&#8203;</p>") is no text.
VISIBLE_CHARACTER = (  # also the silver/views check's (Java's syntax is the same)
    r"[^\s\x00-\x1f\x7f-\x9f\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f"
    r"\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0]"
)
_VISIBLE = re.compile(VISIBLE_CHARACTER)


def visible(text: str) -> bool:
    """True when ``text`` shows anything: a character other than blanks and invisible ones."""
    return _VISIBLE.search(text) is not None


def clean_text(text: str) -> str:
    """Compose to NFC (the same text decomposed, as some exports write accents and kana,
    hashed and paired as another text), drop markup tags (not inequalities), decode
    character references, collapse blanks within lines and blank lines, strip blanks and
    line breaks at both ends. A claim numbered only in its XML tag keeps its number (``1. ``)
    in the text."""
    if not unicodedata.is_normalized("NFC", text):
        text = unicodedata.normalize("NFC", text)
    if "<" in text:
        if "num" in text and "<claim" in text:
            text = _TAGGED_CLAIM.sub(lambda m: f"{m.group(0)}\n{m.group(1)}. ", text)
        text = _TAG.sub(_drop_markup, text)
    if "&" in text:  # after the tags: "&lt;b&gt;" is the text "<b>"
        text = _REFERENCE.sub(lambda m: html.unescape(m.group()), text)
        if not unicodedata.is_normalized("NFC", text):  # "e&#769;" is an é too
            text = unicodedata.normalize("NFC", text)
    return _collapse_line_breaks(_collapse_blanks(text)).strip(" \n")


# A Japanese abstract is a form: 【課題】 the problem, 【解決手段】 the solution, 【選択図】 the
# figure printed beside it ("図１", "なし"); older ones 【目的】 and 【構成】. The labels and the
# figure are no text of the invention (and every JP abstract holds them).
_JP_ABSTRACT_LABEL = re.compile(r"【\s*(?:要約|課題|解決手段|効果|目的|構成|発明の効果)\s*】")
_JP_SELECTED_FIGURE = re.compile(r"【\s*選択図\s*】[^【】。.]{0,20}$")


def abstract_text(text: str) -> str:
    """A cleaned abstract without the labels of the Japanese abstract form."""
    if "【" not in text:
        return text
    text = _JP_ABSTRACT_LABEL.sub("", _JP_SELECTED_FIGURE.sub("", text.rstrip()))
    return _collapse_line_breaks(text).strip()


# A description's paragraph numbers: "[0001]" (US, EP, CN, KR) and "【０００１】" (JP), four
# digits or more ("[1]" may be a reference in the text). Numbering, no text of the invention;
# each becomes a line break, so a description exported without line breaks keeps its
# paragraphs apart (DESC1 and SUMMARY read them). JP's 【技術分野】-style labels stay: they are
# the headings an English description writes as "TECHNICAL FIELD". The blanks around a number
# go with the line break that replaces it (``_collapse_line_breaks``); a pattern that starts at
# the bracket is searched for three times faster than one that starts with optional blanks.
_PARAGRAPH_NUMBER = re.compile(r"\[[0-9０-９]{4,}\]|【[0-9０-９]{4,}】")


def description_text(text: str) -> str:
    """A cleaned description without its paragraph numbers, one paragraph per line.

    >>> description_text("FIELD\\n[0001] A cup. [0002] Tea.")
    'FIELD\\nA cup.\\nTea.'
    """
    if "[" not in text and "【" not in text:
        return text
    text = _PARAGRAPH_NUMBER.sub("\n", text)
    return _collapse_line_breaks(text).strip(" \n")


def _preference(truncated: bool | None) -> int:
    """Complete before truncated; an entry that does not say comes first."""
    return -1 if truncated is None else (1 if truncated else 0)


def ranked_entries(
    entries: Iterable[Mapping | None] | None, field: str | None = None
) -> list[tuple[str | None, str]]:
    """(language, cleaned text) of the non-empty entries of one localized field, best first:
    complete before truncated, then the longest, then the earlier. Abstracts (``field``
    "abstract") also lose the labels of the Japanese abstract form (:func:`abstract_text`),
    descriptions their paragraph numbers (:func:`description_text`)."""
    keyed = []
    for position, entry in enumerate(entries or ()):
        if entry is None or entry["text"] is None:
            continue
        text = clean_text(entry["text"])
        if field == "abstract":
            text = abstract_text(text)
        elif field == "description":
            text = description_text(text)
        if visible(text):  # blanks beyond clean_text's (U+2003), zero-width characters
            keyed.append(((_preference(entry["truncated"]), -len(text), position), entry, text))
    keyed.sort(key=lambda k: k[0])
    return [(entry["language"], text) for _, entry, text in keyed]


def per_language(*fields: Iterable[Mapping | None] | None) -> list[dict]:
    """One dict per language of a record: its best title, abstract, claims and description
    (None where that field has no entry in the language) and the parsed claims.

    ``fields`` are the record's localized arrays in :data:`FIELDS` order, each entry a
    mapping with ``text``, ``language`` and ``truncated``. Languages come in the order they
    first appear in the ranked fields, so a record's rows are always in the same order.
    """
    best: dict[str | None, dict[str, str]] = {}
    for field, entries in zip(FIELDS, fields, strict=True):
        for language, text in ranked_entries(entries, field):
            best.setdefault(language, {}).setdefault(field, text)
    rows = []
    for language, texts in best.items():
        claims = texts.get("claims")
        parsed = split_claims(claims, language) if claims is not None else []
        if claims is not None and not parsed:  # every claim cancelled ("1-20. (canceled)")
            texts = {field: text for field, text in texts.items() if field != "claims"}
        rows.append(
            {
                "lang": language,
                **{field: texts.get(field) for field in FIELDS},
                "parsed_claims": [
                    {
                        "claim_number": c.number,
                        "text": c.text,
                        "independent": c.independent,
                        "depends_on": list(c.depends_on),
                    }
                    for c in parsed
                ],
            }
        )
    return rows
