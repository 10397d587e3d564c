"""A typed claim graph: legal edges (a dependency written in the claim) and technical edges
(claims that share technical terms), for PHAGE-style training (README "Claim graph").

Pure Python over one patent's claims in one language, so every rule is unit-testable; the
``claim_graph`` job collects each (patent, language)'s claims and applies it in an Arrow UDF.

- ``legal``: claim ``src`` names claim ``dst`` (``dst < src``), as parsed into
  ``silver/claims.depends_on``; ``weight`` 1.0; ``evidence`` the reference as written
  ("claim 1 to 3", "any of the preceding claims", "权利要求1或2", "請求項1から3").
- ``technical``: two claims not joined by a legal edge whose technical term sets overlap
  with Jaccard >= ``min_jaccard`` and share >= ``min_shared`` terms; one edge per pair, from
  the later claim to the earlier; ``weight`` the Jaccard overlap; ``evidence`` the shared
  terms (at most ``EVIDENCE_TERMS``, sorted). Terms are lower-cased Latin, Greek and Cyrillic
  words of four letters or more outside a stop list of function words and claim boilerplate
  (English, German, French, Spanish, Portuguese, Italian, Russian, Greek); once claim
  boilerplate (所述, 权利要求, 前記, 請求項, ...) and the words the Latin list stops (第一,
  多个, 方法, 装置, ...) are cut out, character bigrams of Han runs and whole Katakana runs
  (Chinese, Japanese).

    >>> [(e.src, e.dst, e.relation) for e in edges([(1, "A cup.", ()), (2, "The cup of claim 1.", (1,))])]
    [(2, 1, 'legal')]
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from schemas.defaults import TECHNICAL_MIN_JACCARD, TECHNICAL_MIN_SHARED
from spark_jobs.lib.claims import normalize, references

EVIDENCE_TERMS = 8

# Latin letters with their accented forms (Latin-1 and Latin Extended-A): "gehäuse" is one
# word, not "geh" and "use"; Greek (with its polytonic forms) and Cyrillic are written in
# words too
_LETTER = "a-z\u00df-\u00f6\u00f8-\u00ff\u0100-\u017f\u0370-\u03ff\u1f00-\u1fff\u0400-\u052f"
_WORD = re.compile(rf"[{_LETTER}][{_LETTER}\-]{{3,}}")
_STOP = frozenset(
    """
    about above according additionally after also among another apparatus being below
    between both each either from further furthermore have having herein into least more
    most other over said same such than that their them then there thereby therein thereof
    these they this those through under upon were when where whereby wherein which while
    with within without comprise comprises comprising comprised consisting include includes
    including claim claims preceding previous foregoing above-mentioned characterized
    characterised configured arranged adapted method device system plurality first second
    third respective respectively portion portions part parts unit units means step steps
    methods devices systems apparatuses pluralities
    """.split()
    # function words and claim boilerplate of German, French, Spanish, Portuguese and Italian
    # claims (four letters or more), whose references claims.py reads too
    + """
    nach gemäß einem einer eines einen eine dass oder sind wird werden durch über unter
    zwischen sowie mindestens wenigstens ersten zweiten erste zweite dritte mittels wobei
    welche welcher welches dadurch gekennzeichnet umfassend aufweisend anspruch ansprüche
    ansprüchen vorrichtung verfahren system vorhergehenden
    selon dans pour avec sont leur leurs entre moins premier première second seconde
    deuxième ledit ladite lesdits lesdites lequel laquelle lesquels lesquelles dont ainsi
    caractérisé caractérisée comprenant comprend revendication revendications dispositif
    procédé précédentes
    para según donde entre menos primer primera segundo segunda dicho dicha dichos dichas
    cual como también caracterizado caracterizada comprende reivindicación reivindicaciones
    procedimiento método anteriores cualquiera
    secondo detto detta detti dette almeno primo nella nelle dalla della delle degli sono
    come caratterizzato comprendente rivendicazione rivendicazioni dispositivo metodo
    precedenti qualsiasi
    pelo pela dito dita ditos ditas primeiro sendo reivindicação reivindicações
    compreendendo caracterizado qualquer
    """.split()
    # Russian and Greek: the same function words and boilerplate in their common forms
    + """
    содержащий содержащая содержащее содержащие содержащего содержащей отличающийся
    отличающаяся отличающееся отличающиеся пункт пункта пунктов пункту пунктам пунктах
    пункте пунктом способ способа способе устройство устройства устройстве система системы
    системе который которая которое которые которого которой причем этом этого является
    выполнен выполнена выполнено выполнены первый первая первое первого первой второй
    вторая второе второго третий множество между через более менее одного одной одну
    любого любому предыдущих включающий включающая включающее также
    σύμφωνα αξίωση αξίωσης αξιώσεις αξιώσεων μέθοδος μεθόδου διάταξη διάταξης σύστημα
    συστήματος όπου οποίο οποία οποίος πρώτο πρώτη πρώτος δεύτερο δεύτερη δεύτερος
    περιλαμβάνει περιλαμβάνοντας χαρακτηρίζεται τουλάχιστον μεταξύ προηγούμενες
    οποιαδήποτε
    """.split()
)
# claim boilerplate of Chinese (mainland and Taiwan) and Japanese claims, cut out before
# taking bigrams
_CJK_BOILERPLATE = re.compile(
    r"申請專利範圍|申请专利范围|其特徵在於|其特徵是|一種|之|"
    r"根据|按照|如|权利要求|權利要求|请求项|請求項|任一项|任一|所述|其特征在于|其特征是|包括|包含|"
    r"一种|其中|所述的|以及|前記|記載の|いずれか|一項|に記載|において|であって|を備え|"
    r"を有する|前述|上述|前面|该|該|及|或|的|和|与|與|将|將|在|是|为|為|"
    # what the Latin stop list stops: ordinals, "plurality", "at least", "method", "device",
    # "system", "unit", "step", "means", "portion" (cut out as whole words, so no bigram
    # crosses them either)
    r"第[一二三四五六七八九十]+|多个|多個|複数|若干|至少|一个|一個|方法|装置|裝置|设备|設備|"
    r"系统|系統|单元|單元|步骤|步驟|手段|部分|システム|ステップ|ユニット|デバイス"
)
_HAN_RUN = re.compile(r"[\u4e00-\u9fff\u3400-\u4dbf]{2,}")
_KATAKANA_RUN = re.compile(r"[\u30a0-\u30ff\u31f0-\u31ff]{2,}")


@dataclass(frozen=True)
class Edge:
    src: int
    dst: int
    relation: str
    weight: float
    evidence: str


def technical_terms(text: str) -> frozenset[str]:
    """Content terms of a claim: Latin words, Han bigrams, Katakana words (module doc)."""
    text = normalize(text)  # claims are kept as written: ＣＰＵ reads CPU
    latin = {w.strip("-") for w in _WORD.findall(text.lower())} - _STOP
    text = _CJK_BOILERPLATE.sub(" ", text)
    cjk = set(_KATAKANA_RUN.findall(text))  # a Katakana run is one (loan) word
    for run in _HAN_RUN.findall(text):
        cjk.update(run[i : i + 2] for i in range(len(run) - 1))
    return frozenset(t for t in latin | cjk if len(t) >= 2)


def _legal_evidence(text: str, src: int, dst: int) -> str:
    phrases = [phrase for phrase, numbers in references(text, src) if dst in numbers]
    return "; ".join(dict.fromkeys(phrases)) or f"depends on claim {dst}"


def edges(
    claims: list[tuple[int, str, tuple[int, ...] | list[int]]],
    min_jaccard: float = TECHNICAL_MIN_JACCARD,
    min_shared: int = TECHNICAL_MIN_SHARED,
) -> list[Edge]:
    """Typed edges among one patent's claims (``(number, text, depends_on)``), sorted."""
    claims = sorted(claims, key=lambda c: c[0])
    numbers = {number for number, _, _ in claims}
    out: list[Edge] = []
    legal: set[tuple[int, int]] = set()
    for number, text, depends_on in claims:
        for dst in sorted(set(depends_on or ())):
            if dst < number and dst in numbers:  # a reference to a claim that exists
                legal.add((number, dst))
                out.append(Edge(number, dst, "legal", 1.0, _legal_evidence(text, number, dst)))
    terms = {number: technical_terms(text) for number, text, _ in claims}
    for i, (later, _, _) in enumerate(claims):
        for earlier, _, _ in claims[:i]:
            if (later, earlier) in legal:
                continue
            shared = terms[later] & terms[earlier]
            union = terms[later] | terms[earlier]
            if len(shared) < min_shared or not union:
                continue
            jaccard = len(shared) / len(union)
            if jaccard >= min_jaccard:
                evidence = ", ".join(sorted(shared)[:EVIDENCE_TERMS])
                out.append(Edge(later, earlier, "technical", round(jaccard, 4), evidence))
    return sorted(out, key=lambda e: (e.src, e.dst, e.relation))
