"""Language codes: ISO 639-1 validation and normalization ('zh-CN' -> 'zh', 'JA' -> 'ja').

Nothing here fixes the set of corpus languages: any valid ISO 639-1 code is accepted.
"""

from __future__ import annotations

import re

from pyspark.sql import Column
from pyspark.sql import functions as F

ISO_639_1 = frozenset(
    """aa ab ae af ak am an ar as av ay az ba be bg bh bi bm bn bo br bs ca ce ch co cr cs cu
    cv cy da de dv dz ee el en eo es et eu fa ff fi fj fo fr fy ga gd gl gn gu gv ha he hi ho
    hr ht hu hy hz ia id ie ig ii ik io is it iu ja jv ka kg ki kj kk kl km kn ko kr ks ku kv
    kw ky la lb lg li ln lo lt lu lv mg mh mi mk ml mn mr ms mt my na nb nd ne ng nl nn no nr
    nv ny oc oj om or os pa pi pl ps pt qu rm rn ro ru rw sa sc sd se sg si sk sl sm sn so sq
    sr ss st su sv sw ta te tg th ti tk tl tn to tr ts tt tw ty ug uk ur uz ve vi vo wa wo xh
    yi yo za zh zu""".split()
)
# Spellings seen in exports that are not ISO 639-1 primary subtags.
ALIASES = {
    "jp": "ja",
    "cn": "zh",
    "kr": "ko",
    "zho": "zh",
    "chi": "zh",
    "jpn": "ja",
    "eng": "en",
    "kor": "ko",
    "deu": "de",
    "ger": "de",
    "fra": "fr",
    "fre": "fr",
    # the ISO 639-2 codes (terminology / bibliographic) of the other languages patent offices
    # publish in, and the withdrawn 639-1 codes still written (iw, in, ji) and Mandarin's
    "rus": "ru", "spa": "es", "ita": "it", "por": "pt", "nld": "nl", "dut": "nl", "fin": "fi",
    "swe": "sv", "dan": "da", "nor": "no", "nob": "nb", "nno": "nn", "pol": "pl", "ces": "cs",
    "cze": "cs", "slk": "sk", "slo": "sk", "slv": "sl", "hun": "hu", "ron": "ro", "rum": "ro",
    "bul": "bg", "hrv": "hr", "srp": "sr", "ell": "el", "gre": "el", "tur": "tr", "ara": "ar",
    "heb": "he", "hin": "hi", "tha": "th", "vie": "vi", "ind": "id", "msa": "ms", "may": "ms",
    "ukr": "uk", "est": "et", "lav": "lv", "lit": "lt", "isl": "is", "ice": "is", "fas": "fa",
    "per": "fa", "cat": "ca", "glg": "gl", "eus": "eu", "baq": "eu", "cmn": "zh", "iw": "he",
    "in": "id", "ji": "yi",
}  # fmt: skip

# a primary subtag, then any further subtags ('zh-Hant-TW'); nothing else
_CODE = r"([a-z]{2,3})(?:[-_][a-z0-9]+)*"


def normalize_language_py(code: str | None) -> str | None:
    """Python twin of :func:`normalize_language` (used by tests and the trainer)."""
    if code is None:
        return None
    # the same rule as Spark's: F.trim strips spaces only, and the code ends the string (no
    # final line terminator: Java's $ allows \r and \u2028 there, Python's only \n)
    match = re.fullmatch(_CODE, code.strip(" ").lower())
    primary = match.group(1) if match else ""
    primary = ALIASES.get(primary, primary)
    return primary if primary in ISO_639_1 else None


def normalize_language(code: Column) -> Column:
    """ISO 639-1 code for ``code``, or null when it is not a known language."""
    primary = F.regexp_extract(F.lower(F.trim(code)), "^" + _CODE + r"\z", 1)
    alias_map = F.create_map(*[F.lit(x) for pair in sorted(ALIASES.items()) for x in pair])
    resolved = F.coalesce(F.try_element_at(alias_map, primary), primary)
    return F.when(resolved.isin(*sorted(ISO_639_1)), resolved)
