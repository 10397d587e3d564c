"""Split a claims text into numbered claims and parse their dependencies (en, zh, ja, ...).

Pure Python so every rule is unit-testable; curate applies it through an Arrow UDF because
claim grammar (ranges, "any one of", full-width digits, 【請求項１】 markers) is beyond
Spark's built-in string functions.

    >>> [(c.number, c.depends_on) for c in split_claims("1. A cup. 2. The cup of claim 1.", "en")]
    [(1, ()), (2, (1,))]
"""

from __future__ import annotations

import bisect
import functools
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Claim:
    number: int
    text: str
    depends_on: tuple[int, ...]

    @property
    def independent(self) -> bool:
        return not self.depends_on


# 【請求項１】 (JP) and 【청구항 1】 (KR), also in square brackets as plain-text and translated
# copies write them ("[請求項1]", "[청구항 1]", "[Claim 1]"); "1." / "1、" / "1)" at the start
# of a claim (US, EP, CN, WO).
_BRACKET_MARKER = re.compile(
    r"(?:【\s*(?:請求項|청구항)\s*(\d+)\s*】|\[\s*(?:請求項|청구항|claim)\s*(\d+)\s*\])",
    re.IGNORECASE,
)
# A claim marker is a number at the start, after a line break or after the end of the previous
# sentence, followed by '.', '、', ')' and not by a digit (2.5 mm is no marker). A heading word
# before it belongs to the marker, and then a colon or the end of the line may follow the
# number ("Claim 2. The cup ...", "Claim 2: The cup ...", "청구항 2\n청구항 1에 있어서, ...").
# A marker starts with a blank or a digit: the lookahead says so first, so at every other
# character the search fails at once instead of trying the four starts (1.7x faster).
_MARKER = re.compile(
    r"(?=[\s\d])(?:^|(?<=\n)|(?<=[.。;；:])\s*|(?<=\s))(\d+)(?:\s*([.．、):：])|[ \t]*(\n))(?!\d)"
)
_HEADING = frozenset(
    "claim anspruch revendication reivindicación reivindicacion reivindicação reivindicacao "
    "rivendicazione 청구항".split()
)
# A number right after a figure, formula, table or step names that ("as in FIG. 2. 2. The
# cup ..."), not a claim.
_NAMED = frozenset(
    "fig. figs. fig figs figure figures formula formulae table tables step steps equation "
    "equations eq. example examples scheme schemes no. nr.".split()
)
# What may stand before claim 1: nothing, a line ending in a colon ("What is claimed is:"), or
# a short heading without a sentence in it ("CLAIMS", "权利要求书", "Patentansprüche"): a line
# of its own or one holding a claim word. Anything else is claim text, and a number in it
# ("a length of 1. The cup is blue.") opens no claim.
_HEADING_STEMS = re.compile(
    r"claim|权利要求|權利要求|請求|청구|anspr|revendica|reivindica|rivendica|conclusie|krav",
    re.IGNORECASE,
)
# A cancellation ("(canceled)", "[deleted]"; "（削除）" in Japanese, "（删除）" / "（刪除）" in
# Chinese, "삭제" in Korean) and the rest of a range "N-M. " after its N ("-20. ", ".-20 ",
# " to 20. "; group: M), as the cancellation patterns below write them.
_DELETED_WORDS = ("削除", "删除", "刪除", "삭제")
_CANCELLATION = rf"[(\[]?\s*(?:canceled|cancelled|deleted|{'|'.join(_DELETED_WORDS)})"
_RANGE_END = r"\s*\.?\s*(?:-|–|to|through)\s*(\d+)\s*\.?\s*"
# Claims 1 to N cancelled before the first claim ("What is claimed is: 1.-20. (Canceled)").
_CANCELLED_RANGE = re.compile(
    r"\s*(?:what\s+is\s+claimed\s+is|we\s+claim|i\s+claim|claims)?\s*:?\s*1"
    rf"{_RANGE_END}{_CANCELLATION}\s*[)\]]?\s*\.?",
    re.IGNORECASE,
)
# The body of a claim that is only its cancellation ("5. (canceled)"): no claim is left.
_CANCELLED = re.compile(rf"{_CANCELLATION}\s*[)\]]?\s*[.。]?", re.IGNORECASE)
# Claims N to M cancelled inside the claims ("3-5. (canceled)", "8.-10. (Cancelled)");
# group 3 starts the cancellation, a claim body that is no claim.
_CANCELLED_SPAN = re.compile(rf"(?<![\d.,])(\d+){_RANGE_END}({_CANCELLATION}\b)", re.IGNORECASE)
# A US claim listing's status label before a claim's text ("(withdrawn)", "(new)",
# "(currently amended)", "(Withdrawn - Currently Amended)"): no claim text.
_STATUS_WORDS = (
    r"new|original|withdrawn|not\s+entered|(?:currently\s+|previously\s+)?(?:amended|presented)"
)
_STATUS = re.compile(
    rf"\s*[(\[]\s*(?:{_STATUS_WORDS})(?:\s*[-–,/]\s*(?:{_STATUS_WORDS}))*\s*[)\]]\s*",
    re.IGNORECASE,
)
# "claim(s)" before a number: en, zh (simplified and traditional), ja, ko, de, fr, es, pt, it.
# Korean also writes the number between 제 and 항 ("제1항 또는 제2항에 있어서"), Taiwan between
# 第 and 項 ("申請專利範圍第1項"), as Chinese may ("权利要求第1项").
_WORDS = r"claims?|权利要求|權利要求|請求項|请求项|청구항|申請專利範圍|申请专利范围"
_EUROPEAN_WORDS = (
    r"Anspr(?:uch|üchen|üche|uchs)|revendications?|reivindicaci(?:ones|ón)"
    r"|reivindicaç(?:ões|ão)|rivendicazion[ei]"
)
_CLAIM_WORDS = f"{_WORDS}|{_EUROPEAN_WORDS}"


def _keyword(words: str) -> re.Pattern:
    # Italian ranges read "rivendicazioni da 1 a 3".
    return re.compile(rf"(?:{words}|제(?=\s*\d+\s*항))\s*(?:第\s*|da\s+)?", re.IGNORECASE)


_KEYWORD = _keyword(_WORDS)
_KEYWORD_EUROPEAN = _keyword(_CLAIM_WORDS)
# The European words and the "preceding claims" phrases are searched for only in texts whose
# lower-cased form holds one of these stems: the full patterns cost 4x as much on every claim.
_EUROPEAN_STEMS = re.compile(r"anspr|revendica|reivindica|rivendica")
_PREVIOUS_STEMS = re.compile(
    r"preced|previous|foregoing|above|prior|前述|上述|前面|前記いずれか|前記何れか|前記の?請求項"
    r"|先行|선행|전술|앞선"
    r"|vorh|voran|vorst|précéd|antérieur|anterior|precedent"
)
# NFKC leaves the wave dash of Japanese texts (〜, U+301C; "請求項１〜３") and the dashes
# other than the hyphen-minus as they are. ないし is 乃至 written in kana ("請求項1ないし3":
# claims 1 to 3).
_RANGE = r"to|through|until|-|–|—|―|‐|‑|−|~|〜|至|到|乃至|ないし|から|bis|à|a|al|내지"
_LIST = (
    r"or|and|and/or|,|、|，|或|和|及|以及|又は|または|若しくは|もしくは|及び|および"
    r"|oder|und|ou|et|o|y|e|또는|및"
)
_NUMBER = re.compile(r"(\d+)(?:\s*[항項项])?")
# A connector counts only before another number, so "a" (es, pt, it: "1 a 3") never hides
# "and" and a word that merely starts like a connector ends the list. A serial comma may
# come before "or" / "and" ("claim 1, 2, or 3"), not before a one-letter word ("claim 1, a 3
# mm lid").
_CONNECTOR = re.compile(
    rf"\s*(?:,\s*(?=(?:and/or|and|or)\s))?(?:({_RANGE})|{_LIST})\s*(?:{_CLAIM_WORDS})?\s*"
    r"(?:제|第)?\s*(?=\d)",
    re.IGNORECASE,
)
_ALL_PREVIOUS = re.compile(
    r"(?:any|one|each)\s+(?:one\s+)?(?:or\s+more\s+)?(?:of\s+the\s+)?"
    r"(?:preceding|previous|foregoing|above|prior)\s+claims?\b"
    r"|(?:any|one)\s+(?:one\s+)?of\s+the\s+claims\s+above\b"
    r"|(?:前述|上述|前面)的?(?:任一|任意一)项?(?:权利要求|權利要求)"
    r"|(?:前述|上述|前面)的?(?:权利要求|權利要求)中?的?(?:任一|任意一)项?"
    r"|(?:前記|先行する)(?:いずれか|何れか)の請求項"
    r"|(?:前述の|前記の?|先行する)請求項の(?:いずれか|何れか)"
    r"|(?:선행하는|전술한|앞선|선행)\s*(?:청구)?항\s*중\s*어느\s*(?:한\s*)?항"
    r"|(?:einem|einen|jedem)(?:\s+oder\s+mehreren)?\s+der\s+"
    r"(?:vorhergehenden|vorangehenden|vorangegangenen|vorstehenden|vorherigen)\s+Ansprüche"
    r"|(?:l['’]une|l['’]un|une|un|n['’]importe\s+laquelle)\s+(?:quelconque\s+)?"
    r"des\s+revendications\s+"
    r"(?:précédentes|antérieures)"
    r"|(?:cualquiera|una)\s+de\s+las\s+reivindicaciones\s+(?:anteriores|precedentes)"
    r"|(?:qualquer\s+uma|uma)\s+das\s+reivindicações\s+(?:anteriores|precedentes)"
    r"|una\s+(?:qualsiasi\s+)?delle\s+rivendicazioni\s+(?:precedenti|anteriori)",
    re.IGNORECASE,
)
# "the preceding claim": the claim just before.
_PREVIOUS = re.compile(
    r"the\s+(?:immediately\s+)?(?:preceding|previous|foregoing)\s+claim\b"
    r"|dem\s+(?:vorhergehenden|vorangehenden|vorstehenden)\s+Anspruch\b"
    r"|la\s+revendication\s+(?:précédente|antérieure)"
    r"|la\s+reivindicación\s+(?:anterior|precedente)",
    re.IGNORECASE,
)


@functools.cache
def _composing() -> re.Pattern:
    """Characters NFKC may compose with the one before (the second of a canonical pair, a
    Hangul jamo, one whose normal form holds such a character) and every character beyond
    the Basic Multilingual Plane: where none occurs, NFKC maps each character by itself.
    Built on first use (~40 ms): only texts that normalization changes need it."""
    second = set()
    for code in range(0x10000):
        parts = unicodedata.decomposition(chr(code)).split()
        if len(parts) == 2 and not parts[0].startswith("<"):
            second.add(chr(int(parts[1], 16)))
    chars = second | {
        chr(code)
        for code in range(0x10000)
        if second & set(unicodedata.normalize("NFKC", chr(code)))
    }
    ranges = "\u1100-\u11ff\ua960-\ua97f\ud7b0-\ud7ff\U00010000-\U0010ffff"
    return re.compile("[" + "".join(re.escape(c) for c in sorted(chars)) + ranges + "]")


@functools.cache
def _resized() -> re.Pattern:
    """Characters of the Basic Multilingual Plane whose NFKC form is not one character
    (㎏ -> kg, ℃ -> °C). Built on first use, like :func:`_composing`."""
    chars = (chr(c) for c in range(0x10000) if len(unicodedata.normalize("NFKC", chr(c))) != 1)
    return re.compile("[" + "".join(re.escape(c) for c in chars) + "]")


def _original_places(text: str, clean: str) -> Callable[[int], int] | None:
    """Where each place of ``clean`` (``normalize(text)``) lies in ``text``, when NFKC mapped
    every character by itself (``_composing``); None when the texts are equal or characters
    were composed (e + U+0301 -> é: no place of ``text`` holds the result)."""
    if clean == text or _composing().search(text):
        return None
    if len(clean) == len(text):
        return lambda place: place
    ends, shifts = [], []  # the clean place after each resized character, the shift from there
    shift = 0
    for m in _resized().finditer(text):
        shift += len(unicodedata.normalize("NFKC", m.group())) - 1
        ends.append(m.start() + shift + 1)
        shifts.append(shift)
    return lambda place: place - (shifts[k - 1] if (k := bisect.bisect_right(ends, place)) else 0)


def normalize(text: str) -> str:
    """NFKC: full-width digits and punctuation become ASCII (１ -> 1, ～ -> ~)."""
    if unicodedata.is_normalized("NFKC", text):  # a quick check: a quarter of CJK claims
        return text
    return unicodedata.normalize("NFKC", text)


def _bracket_spans(text: str) -> list[tuple[int, int, int]]:
    """(claim number, body start, body end) at 【請求項N】 / 【청구항 N】 / [Claim N] markers
    numbered 1, 2, 3, ... in order.

    A marker out of that sequence (a repeated or amended claim set, a number skipped) stays
    in the body of the claim before it, so every number is unique and no text is lost; a
    text whose markers do not start at 【請求項1】 before any other gives no segments (the
    generic rules then apply)."""
    if "【" not in text and "[" not in text:
        return []
    accepted = []
    for m in _BRACKET_MARKER.finditer(text):
        if int(m.group(1) or m.group(2)) == len(accepted) + 1:
            accepted.append(m)
        elif not accepted:
            return []
    return [
        (i + 1, m.end(), accepted[i + 1].start() if i + 1 < len(accepted) else len(text))
        for i, m in enumerate(accepted)
    ]


def _after_sentence_end(text: str, pos: int) -> bool:
    """True when the last character before ``pos`` other than a blank ends a sentence or a
    line (or there is none)."""
    before = text[max(0, pos - 64) : pos].rstrip(" \t\r\f\v")
    return not before or before[-1] in ".。\n"


def _ends_item(text: str, at: int) -> bool:
    """True when a sentence ends before ``at``, or a line that does not end a list's item
    (";", ",", ":"): in a list with one item per line ("步骤：\n1)获取数据；\n2)处理数据；")
    the line break alone does not end the list."""
    before = text[max(0, at - 64) : at].rstrip()
    return not (before and before[-1] in ";；,，:：") and _after_sentence_end(text, at)


def _marker_ahead(text: str, markers: list[re.Match], i: int, reach: int = 50) -> bool:
    """True when a later marker of ``markers[i]``'s number follows the end of a sentence or a
    line before any marker of the next number: the number at ``i`` ends a claim's text ("n
    is 1 or 2.") and that later one opens the claim."""
    number = int(markers[i].group(1))
    for m in markers[i + 1 : i + 1 + reach]:
        found = int(m.group(1))
        if found == number + 1:
            return False
        if (
            found == number
            and not (m.group(3) or m.group(2) in ":：")
            and _after_sentence_end(text, m.start(1))
        ):
            return True
    return False


def _opens_claims(text: str, pos: int, marker: int) -> bool:
    """True when ``text[pos:marker]``, before claim 1's marker, is no claim text."""
    before = text[pos:marker].rstrip(" \t\r\f\v")
    at_line_start = before.endswith("\n")
    before = before.strip()
    if not before or before[-1] in ":：":
        return True
    if len(before) > 80 or re.search(r"[.。!?;；]", before):
        return False
    return at_line_start or _HEADING_STEMS.search(before) is not None


def _may_cancel(text: str) -> bool:
    """True when ``text`` may cancel claims inside the claims (a cheap test first)."""
    lower = text.lower()
    return "cancel" in lower or "delete" in lower or any(w in text for w in _DELETED_WORDS)


def _numbered_spans(text: str) -> list[tuple[int, int, int]]:
    """(claim number, body start, body end) in order; the numbers must run 1, 2, 3, ..., or
    N+1, N+2, ... after claims 1 to N cancelled at the start ("1-20. (canceled)", as US
    publications of continuations begin). A range cancelled inside the claims ("3-5.
    (canceled)" after a sentence or line) stands for its claims: its body is the
    cancellation, and the numbers go on after it.

    A list numbered inside a claim ("comprising: 1) heating; 2) cooling", "步骤：1.获取；
    2.处理") is not a claim sequence: a marker 1 after the first claim opens one, and a number
    that would continue both that list and the claims belongs to the list unless a sentence
    or a line ends before it. Claim 1's marker follows nothing but a heading
    (``_opens_claims``): in unnumbered claims a number ("a length of 1. The cup") opens no
    claim, and the whole text stays one claim."""
    bracketed = _bracket_spans(text)
    if bracketed:
        return bracketed
    first, pos = 1, 0
    cancelled = _CANCELLED_RANGE.match(text)
    if cancelled:  # a continuation's claims go on after the cancelled ones
        first, pos = int(cancelled.group(1)) + 1, cancelled.end()
    segments: list[tuple[int, int, int]] = []  # (number, marker start, body start)
    inner_next = 0  # the next number of a list open inside the current claim; 0: none
    skipped = 0  # claims cancelled as ranges inside the claims
    spans = list(_CANCELLED_SPAN.finditer(text, pos)) if _may_cancel(text) else []
    covered = 0  # the end of the last cancelled range taken: markers inside it are none
    markers = list(_MARKER.finditer(text, pos))
    for i, m in enumerate(markers):
        number, at, start = int(m.group(1)), m.start(1), m.start()
        while spans and spans[0].start() <= at:
            c = spans.pop(0)
            expected = first + skipped + len(segments)
            if (
                segments
                and int(c.group(1)) == expected < int(c.group(2))
                and c.start() >= covered
                and _after_sentence_end(text, c.start())
            ):
                segments.append((expected, c.start(), c.start(3)))
                skipped += int(c.group(2)) - expected
                covered, inner_next = c.end(), 0
        if at < covered:
            continue
        expected = first + skipped + len(segments)
        lo = max(pos, at - 24)
        before = text[lo:at].rstrip()
        word = before.rsplit(None, 1)[-1].lower() if before else ""
        if word in _HEADING:  # "Claim 2." / "Claim 2:": the marker starts at the word
            at = start = lo + len(before) - len(word)
        elif m.group(3) or m.group(2) in ":：" or word in _NAMED or word[-1:] in ("図", "图"):
            continue  # "at 1: heat", "size 1\n", "as in FIG. 2."
        if not segments and number == first and not _opens_claims(text, pos, start):
            continue  # "a length of 1. The cup is blue.": claim text, no marker
        if number == expected and (number != inner_next or _ends_item(text, at)):
            if not _after_sentence_end(text, at) and _marker_ahead(text, markers, i):
                continue  # "wherein n is 1 or 2.\n2. The compound": the second one
            segments.append((number, start, m.end()))
            inner_next = 0
        elif number == 1 and segments:
            inner_next = 2
        elif inner_next and number == inner_next:
            inner_next += 1
    return [
        (number, body_start, segments[i + 1][1] if i + 1 < len(segments) else len(text))
        for i, (number, _, body_start) in enumerate(segments)
    ]


def references(text: str, own_number: int) -> list[tuple[str, tuple[int, ...]]]:
    """Each back-reference of ``text`` (normalized: 請求項１ reads 請求項1) and the earlier
    claims it names.

    >>> references("The cup of claim 1 or 2.", 3)
    [('claim 1 or 2', (1, 2))]
    """
    return _references(normalize(text), own_number)


def _references(text: str, own_number: int) -> list[tuple[str, tuple[int, ...]]]:
    found: list[tuple[str, tuple[int, ...]]] = []
    lower = text.lower()
    if _PREVIOUS_STEMS.search(lower):
        for m in _ALL_PREVIOUS.finditer(text):
            found.append((m.group(0), tuple(range(1, own_number))))
        if own_number > 1:
            found.extend((m.group(0), (own_number - 1,)) for m in _PREVIOUS.finditer(text))
    keyword = _KEYWORD_EUROPEAN if _EUROPEAN_STEMS.search(lower) else _KEYWORD
    consumed = 0  # the end of the last reference: "claim 2" in "claim 1 or claim 2" is in it
    for kw in keyword.finditer(text):
        if kw.start() < consumed:
            continue
        pos = kw.end()
        m = _NUMBER.match(text, pos)
        if not m:
            continue
        numbers = [int(m.group(1))]
        pos = m.end()
        while True:
            conn = _CONNECTOR.match(text, pos)
            if not conn:
                break
            nxt = _NUMBER.match(text, conn.end())
            value = int(nxt.group(1))
            if conn.group(1) and value >= numbers[-1]:  # a range word, not a list word
                # only the claims before this one count: "1 to 10000000" costs nothing more
                numbers.extend(range(numbers[-1] + 1, min(value, own_number)))
            numbers.append(value)
            pos = nxt.end()
        consumed = pos
        earlier = tuple(sorted({n for n in numbers if 0 < n < own_number}))
        if earlier:
            found.append((text[kw.start() : pos], earlier))
    return found


def parse_references(text: str, own_number: int) -> tuple[int, ...]:
    """Claim numbers ``text`` refers back to (only numbers below ``own_number``)."""
    return _numbers(references(text, own_number))


def _numbers(found: list[tuple[str, tuple[int, ...]]]) -> tuple[int, ...]:
    return tuple(sorted({n for _, numbers in found for n in numbers}))


def split_claims(text: str | None, lang: str | None = None) -> list[Claim]:
    """Numbered claims with their back-references.

    A text without recognisable numbering is returned as one independent claim 1, so no claim
    text is ever lost. ``lang`` is accepted for clarity; the markers of all supported
    languages are recognised in any text.
    """
    if text is None or not text.strip():
        return []
    clean = normalize(text)
    spans = _numbered_spans(clean)
    if not spans:
        if _CANCELLED_RANGE.fullmatch(clean):
            return []  # every claim cancelled
        return [Claim(1, " ".join(text.split()), ())]
    # Markers and references are read in the normalized text; a claim keeps its text as
    # written (full-width punctuation and digits, ℃) where normalization mapped every
    # character by itself, which nearly every text does.
    original = _original_places(text, clean)
    claims = []
    for number, start, end in spans:
        label = _STATUS.match(clean, start, end)
        start = label.end() if label else start
        body = " ".join(clean[start:end].split())
        if not body or _CANCELLED.fullmatch(body):
            continue
        written = (
            body if original is None else " ".join(text[original(start) : original(end)].split())
        )
        claims.append(Claim(number, written, _numbers(_references(body, number))))
    return claims


def first_independent_claim(claims: list[Claim]) -> Claim | None:
    return next((c for c in claims if c.independent), None)
