"""Extractive summary of a patent text by SumBasic (Nenkova & Vanderwende, 2005).

The query type ``SUMMARY`` of the evaluation: deterministic, no model. The text (abstract,
then description) is split into sentences and into terms (lower-cased words of three or more
letters outside scikit-learn's English stop words; character bigrams in Chinese and Japanese).
Each term's probability is its share of all terms. Repeatedly: take the most probable term
(all of them when tied), choose among the sentences holding it the one with the highest mean
term probability (ties: the earlier sentence), then square the probabilities of the chosen sentence's terms, so that
what it said counts less for the next pick. Stops after ``sentences`` picks or ``max_chars``
characters; the picked sentences are returned in their order in the text.
"""

from __future__ import annotations

import re
from collections import Counter

# Where a sentence may end: after . ! ? and a blank (Latin script), after 。！？ (and the
# full-width and half-width periods ．｡ of Japanese texts punctuated "，．"), at line ends.
# A full-width period between digits is a decimal point ("０．５ｍｍ"), no sentence end.
_BREAK = re.compile(r"[.!?][^\S\n]+|[。！？]|[．｡](?![0-9０-９])|(?<![0-9０-９])[．｡]|\n+")
# Not a sentence end: a period of an abbreviation patents are full of ("FIG. 1", "U.S. Pat.
# No. 5,123,456", "e.g. water", "Smith et al. (2001)"), or one that a lower-case letter or a
# digit follows.
_ABBREVIATION = re.compile(
    r"(?:^|[\s(\[])(?:figs?|nos?|pat|ser|appl|publ|u\.s|e\.g|i\.e|al|approx|vol|wt|ca|inc|co|"
    r"ltd|corp|dr|mr|ms|vs|cf|ref|eqs?|ex|para|sec)\.$",
    re.IGNORECASE,
)
_CONTINUES = re.compile(r"[a-z0-9]")
# a paragraph number at the start of a line: [0001] (US, EP, CN, KR) or 【０００１】 (JP); one
# pattern for Python's re and Java's (Spark SQL), whose \s and \d are ASCII only
PARAGRAPH_NUMBER_PATTERN = r"^[\s\u3000]*(?:\[[0-9０-９]+\]|【[0-9０-９]+】)[\s\u3000]*"
PARAGRAPH_NUMBER = re.compile(PARAGRAPH_NUMBER_PATTERN)
WORD = re.compile(r"[^\W\d_]{3,}")
CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]+")
SENTENCES = 3
MAX_CHARS = 600

# A heading rather than text (shared with DESC1, ``query_types._heading``; one pattern for
# Python's re and Java's): a line in capitals (Latin script: a line of Han, kana or Hangul is
# none), a 【...】 label, or a short line that ends no sentence.
CJK_CLASS = "\\u3040-\\u30ff\\u3400-\\u4dbf\\u4e00-\\u9fff\\uac00-\\ud7af"
HEADING_MAX_CHARS = 80
HEADING_LABEL = "^【[^】]*】$"
NO_LOWER_CASE = f"^[^a-z{CJK_CLASS}]*$"
SENTENCE_END = "[.。．｡:：;；!?！？]$"


_LABEL, _NO_LOWER, _CAPITAL, _END = map(
    re.compile, (HEADING_LABEL, NO_LOWER_CASE, "[A-Z]", SENTENCE_END)
)


def is_heading(text: str) -> bool:
    """The Python twin of ``query_types._heading`` (see the patterns above)."""
    if _LABEL.search(text):
        return True
    if _NO_LOWER.search(text) and _CAPITAL.search(text):
        return True
    return len(text) < HEADING_MAX_CHARS and not _END.search(text)


def sentences(text: str) -> list[str]:
    """Sentences of ``text``: split after . ! ? (with a following blank; not after an
    abbreviation, nor before a lower-case letter or a digit), after 。！？．｡ and at
    line ends; paragraph numbers such as ``[0003]`` or ``【０００３】`` removed; empty pieces
    dropped."""
    text = text or ""
    pieces, start = [], 0
    for m in _BREAK.finditer(text):
        if m.group(0)[0] in ".!?" and (
            _CONTINUES.match(text, m.end())
            or _ABBREVIATION.search(text, max(0, m.start() - 16), m.start() + 1)
        ):
            continue
        pieces.append(text[start : m.end()])
        start = m.end()
    pieces.append(text[start:])
    cleaned = (PARAGRAPH_NUMBER.sub("", p).strip() for p in pieces)
    return [p for p in cleaned if p]


def terms(sentence: str, lang: str) -> list[str]:
    """Content terms of one sentence (see the module docstring)."""
    if lang in ("zh", "ja"):
        return [run[i : i + 2] for run in CJK.findall(sentence) for i in range(len(run) - 1)]
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    words = (w.lower() for w in WORD.findall(sentence))
    return [w for w in words if w not in ENGLISH_STOP_WORDS]


def sumbasic(
    text: str | None, lang: str, n_sentences: int = SENTENCES, max_chars: int = MAX_CHARS
) -> str | None:
    """The SumBasic summary of ``text``; None when it has no sentence. Headings
    (``is_heading``: "TECHNICAL FIELD", "【発明の概要】") are no sentences to pick, unless the
    text holds nothing else."""
    units = sentences(text or "")
    if not units:
        return None
    units = [u for u in units if not is_heading(u)] or units
    bags = [terms(s, lang) for s in units]
    counts = Counter(t for bag in bags for t in bag)
    total = sum(counts.values())
    if not total:
        return units[0][:max_chars]
    prob = {t: c / total for t, c in counts.items()}
    chosen: list[int] = []
    length = 0
    while len(chosen) < n_sentences and length < max_chars:
        open_ = [i for i in range(len(units)) if i not in chosen and bags[i]]
        if not open_:
            break
        top = max(prob[t] for i in open_ for t in bags[i])
        holders = [i for i in open_ if any(prob[t] == top for t in bags[i])]
        best = max(holders, key=lambda i: (sum(prob[t] for t in bags[i]) / len(bags[i]), -i))
        chosen.append(best)
        length += len(units[best])
        for t in set(bags[best]):
            prob[t] = prob[t] ** 2
    joiner = "" if lang in ("zh", "ja") else " "
    return joiner.join(units[i] for i in sorted(chosen))[:max_chars]
