"""Curate's per-record text rules (spark_jobs.lib.texts): cleaning, best entry, claims."""

import pytest

from spark_jobs.lib.texts import clean_text, per_language, ranked_entries


def entry(text, language="en", truncated=False):
    return {"text": text, "language": language, "truncated": truncated}


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("An <b>old</b> cup", "An old cup"),
        ("a < b and c > d", "a d"),  # anything between < and > within 200 characters
        ("no closing < here", "no closing < here"),
        ("x <" + "y" * 201 + "> z", "x <" + "y" * 201 + "> z"),  # over 200 characters: no tag
        ("tab\tand\u00a0nbsp\u3000ideographic   spaces", "tab and nbsp ideographic spaces"),
        ("line one  \n \x0b\n  line two", "line one\nline two"),
        ("  \n lead and trail \n  ", "\nlead and trail\n"),  # only spaces are stripped
        ("para\u2028graph", "para\u2028graph"),  # not ASCII whitespace: left alone
        (" <br> ", ""),
    ],
)
def test_clean_text(raw, clean):
    assert clean_text(raw) == clean


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
