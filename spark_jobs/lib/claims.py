"""Split a claims text into numbered claims and parse their dependencies (en, zh, ja, ...).

Pure Python so every rule is unit-testable; curate applies it through an Arrow UDF because
claim grammar (ranges, "any one of", full-width digits, 【請求項１】 markers) is beyond
Spark's built-in string functions.

    >>> [(c.number, c.depends_on) for c in split_claims("1. A cup. 2. The cup of claim 1.", "en")]
    [(1, ()), (2, (1,))]
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass


@dataclass(frozen=True)
class Claim:
    number: int
    text: str
    depends_on: tuple[int, ...]

    @property
    def independent(self) -> bool:
        return not self.depends_on


# 【請求項１】 (JP), "1." / "1、" / "1)" at the start of a claim (US, EP, CN, WO).
_JP_MARKER = re.compile(r"【\s*請求項\s*(\d+)\s*】")
_KEYWORD = re.compile(r"(claims?|权利要求|權利要求|請求項|청구항)\s*", re.IGNORECASE)
_RANGE = r"to|through|until|-|–|~|至|到|乃至|から"
_LIST = r"or|and|and/or|,|、|，|或|和|及|以及|又は|または|若しくは|もしくは|及び|および|ないし"
_NUMBER = re.compile(r"(\d+)")
_CONNECTOR = re.compile(
    rf"\s*({_RANGE}|{_LIST})\s*(?:claims?\s*|请求项\s*|請求項\s*)?", re.IGNORECASE
)
_ALL_PREVIOUS = re.compile(
    r"any\s+(?:one\s+)?of\s+the\s+(?:preceding|previous|foregoing|above)\s+claims"
    r"|(?:前述|上述|前面)任一(?:项)?权利要求"
    r"|前記いずれかの請求項|先行するいずれかの請求項",
    re.IGNORECASE,
)


def normalize(text: str) -> str:
    """NFKC: full-width digits and punctuation become ASCII (１ -> 1, ～ -> ~)."""
    return unicodedata.normalize("NFKC", text)


def _jp_segments(text: str) -> list[tuple[int, str]]:
    """(claim number, body) at 【請求項N】 markers numbered 1, 2, 3, ... in order.

    A marker out of that sequence (a repeated or amended claim set, a number skipped) stays
    in the body of the claim before it, so every number is unique and no text is lost; a
    text whose markers do not start at 【請求項1】 before any other gives no segments (the
    generic rules then apply)."""
    accepted = []
    for m in _JP_MARKER.finditer(text):
        if int(m.group(1)) == len(accepted) + 1:
            accepted.append(m)
        elif not accepted:
            return []
    return [
        (i + 1, text[m.end() : accepted[i + 1].start() if i + 1 < len(accepted) else None])
        for i, m in enumerate(accepted)
    ]


def _numbered_segments(text: str) -> list[tuple[int, str]]:
    """(claim number, body) in order; the number sequence must run 1, 2, 3, ..."""
    jp = _jp_segments(text)
    if jp:
        return jp
    segments: list[tuple[int, int, int]] = []  # (number, marker start, body start)
    expected, pos = 1, 0
    while True:
        # A claim marker is the expected number at the start, after a line break or after
        # the end of the previous sentence, followed by '.', '、', ')' and not by a digit.
        pattern = re.compile(rf"(?:^|(?<=\n)|(?<=[.。;；:])\s*|(?<=\s)){expected}\s*[.．、)](?!\d)")
        m = pattern.search(text, pos)
        if not m:
            break
        segments.append((expected, m.start(), m.end()))
        expected, pos = expected + 1, m.end()
    if not segments:
        return []
    out = []
    for i, (number, _, body_start) in enumerate(segments):
        end = segments[i + 1][1] if i + 1 < len(segments) else len(text)
        out.append((number, text[body_start:end]))
    return out


def references(text: str, own_number: int) -> list[tuple[str, tuple[int, ...]]]:
    """Each back-reference of ``text`` as written and the earlier claims it names.

    >>> references("The cup of claim 1 or 2.", 3)
    [('claim 1 or 2', (1, 2))]
    """
    found: list[tuple[str, tuple[int, ...]]] = []
    for m in _ALL_PREVIOUS.finditer(text):
        found.append((m.group(0), tuple(range(1, own_number))))
    for kw in _KEYWORD.finditer(text):
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
            if not nxt:
                break
            value = int(nxt.group(1))
            if re.fullmatch(_RANGE, conn.group(1), re.IGNORECASE) and value >= numbers[-1]:
                numbers.extend(range(numbers[-1] + 1, value + 1))
            else:
                numbers.append(value)
            pos = nxt.end()
        earlier = tuple(sorted({n for n in numbers if 0 < n < own_number}))
        if earlier:
            found.append((text[kw.start() : pos], earlier))
    return found


def parse_references(text: str, own_number: int) -> tuple[int, ...]:
    """Claim numbers ``text`` refers back to (only numbers below ``own_number``)."""
    return tuple(sorted({n for _, numbers in references(text, own_number) for n in numbers}))


def split_claims(text: str | None, lang: str | None = None) -> list[Claim]:
    """Numbered claims with their back-references.

    A text without recognisable numbering is returned as one independent claim 1, so no claim
    text is ever lost. ``lang`` is accepted for clarity; the markers of all supported
    languages are recognised in any text.
    """
    if text is None or not text.strip():
        return []
    clean = normalize(text)
    segments = _numbered_segments(clean)
    if not segments:
        return [Claim(1, " ".join(clean.split()), ())]
    claims = []
    for number, body in segments:
        body = " ".join(body.split())
        if body:
            claims.append(Claim(number, body, parse_references(body, number)))
    return claims


def first_independent_claim(claims: list[Claim]) -> Claim | None:
    return next((c for c in claims if c.independent), None)
