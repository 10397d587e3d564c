"""Google Patents `publications` export records (one JSON line each), including bad ones.

A share of records is corrupted the ways real exports go wrong; each corruption kind maps
to the quarantine reason ingest must give it, so the generator's manifest states exactly
what ingest has to quarantine.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

from spark_jobs.lib.sample import plan as sample_plan
from spark_jobs.lib.sample.claims_plan import claim_plan
from spark_jobs.lib.sample.render import render_patent

# corruption kind -> quarantine reason prefix ingest must give it (lines affected per event)
CORRUPTIONS = {
    "bad_json": ("unparseable_json", 1),
    "missing_id": ("missing_publication_number", 1),
    "empty_texts": ("no_text", 1),
    "impossible_date": ("invalid_date", 1),
    "unknown_language": ("unknown_language", 1),
    "duplicate_conflict": ("duplicate_id_conflict", 2),
}
EXACT_DUPLICATE = "exact_duplicate"  # benign: the same line twice; ingest keeps one
_LANGUAGE_SPELLINGS = {
    "zh": ("zh", "zh-CN", "ZH", "zh_CN"),
    "ja": ("ja", "ja-JP", "JA"),
    "en": ("en", "en-US", "EN"),
}


def corruption_of(plan: sample_plan.CorpusPlan, index: int, share: float) -> str | None:
    """The corruption applied to publication ``index`` (None for a clean record)."""
    r = sample_plan.rng(plan.seed, sample_plan._S_BAD, index)
    roll = r.random()
    if roll < share:
        return sorted(CORRUPTIONS)[int(roll / share * len(CORRUPTIONS)) % len(CORRUPTIONS)]
    if roll < share * 1.25:
        return EXACT_DUPLICATE
    return None


def _yyyymmdd(d) -> int:
    return int(d.strftime("%Y%m%d"))


def _localized(text: str, lang: str, r: random.Random) -> dict:
    spelling = _LANGUAGE_SPELLINGS[lang]
    language = spelling[0] if r.random() < 0.95 else r.choice(spelling[1:])
    return {"text": text, "language": language, "truncated": False}


def _classification(inv: sample_plan.Invention, r: random.Random, cluster: int) -> list[dict]:
    main = f"{inv.field.key}{cluster % 97 + 1}/{r.choice(['00', '02', '04', '10', '12', '20'])}"
    codes = [main]
    if r.random() < 0.5:
        codes.append(f"{inv.field.key}{r.randint(1, 99)}/{r.randint(0, 99):02d}")
    return [{"code": c, "inventive": i == 0, "first": i == 0} for i, c in enumerate(codes)]


def publication_record(plan: sample_plan.CorpusPlan, member: sample_plan.Member) -> dict:
    """The clean export record of one family member."""
    inv = sample_plan.invention(plan, member.family)
    claims = claim_plan(inv, sample_plan.rng(plan.seed, sample_plan._S_TEXT, member.family))
    r = sample_plan.rng(plan.seed, sample_plan._S_TEXT, member.family, member.index)
    abstract_core = sample_plan.abstract_core(
        plan, inv, member
    )  # None unless abstracts omit features
    text = render_patent(inv, claims, member.lang, r, abstract_core)
    localized = {k: [_localized(v, member.lang, r)] for k, v in text.items()}
    if member.english_abstract:  # Google adds English title/abstract to many CN/JP documents
        english = render_patent(inv, claims, "en", r, abstract_core)
        localized["title"].append(_localized(english["title"], "en", r))
        localized["abstract"].append(_localized(english["abstract"], "en", r))
    ipc = _classification(inv, r, plan.cluster_of(member.family))
    # Real exports disagree on which of type/category holds the relevance letters.
    letters_in_category = r.random() < 0.7
    cites = []
    for c in sample_plan.citations(plan, member):
        kind, letters = c.source, c.letters
        cites.append(
            {
                "publication_number": c.publication_number,
                "application_number": c.application_number,
                "npl_text": c.npl_text,
                "type": kind if letters_in_category else letters,
                "category": letters if letters_in_category else kind,
                "filing_date": c.filing_date,
            }
        )
    return {
        "publication_number": member.publication_number,
        "application_number": member.application_number,
        "country_code": member.country,
        "kind_code": member.kind_code,
        "application_kind": member.kind_code[:1],
        "family_id": sample_plan.family_id(member.family),
        "publication_date": _yyyymmdd(member.publication_date),
        "filing_date": _yyyymmdd(member.filing_date),
        "grant_date": _yyyymmdd(member.publication_date) if member.kind_code.startswith("B") else 0,
        "priority_date": _yyyymmdd(member.priority_date),
        "title_localized": localized["title"],
        "abstract_localized": localized["abstract"],
        "claims_localized": localized["claims"],
        "description_localized": localized["description"],
        "ipc": ipc,
        "cpc": ipc,
        "citation": cites,
    }


def corrupt(record: dict, kind: str, r: random.Random) -> list[str]:
    """JSON lines for ``record`` after applying corruption ``kind``."""
    if kind == "bad_json":
        line = json.dumps(record, ensure_ascii=False)
        return [line[: r.randint(10, len(line) // 2)]]
    if kind == "missing_id":
        if r.random() < 0.5:
            del record["publication_number"]
        else:
            record["publication_number"] = ""
    elif kind == "empty_texts":
        for field in (
            "title_localized",
            "abstract_localized",
            "claims_localized",
            "description_localized",
        ):
            record[field] = [dict(e, text="") for e in record[field]] if r.random() < 0.5 else []
    elif kind == "impossible_date":
        field = r.choice(["filing_date", "publication_date"])
        record[field] = r.choice([20251341, 20230230, 20190000, 99999999])
    elif kind == "unknown_language":
        record["abstract_localized"][0]["language"] = r.choice(["xx", "zz", "qq-XX", "klingon"])
    elif kind == "duplicate_conflict":
        twin = json.loads(json.dumps(record))
        twin["abstract_localized"][0]["text"] += " (corrected)"
        return [json.dumps(record, ensure_ascii=False), json.dumps(twin, ensure_ascii=False)]
    elif kind == EXACT_DUPLICATE:
        line = json.dumps(record, ensure_ascii=False)
        return [line, line]
    return [json.dumps(record, ensure_ascii=False)]


def family_lines(plan: sample_plan.CorpusPlan, family: int, bad_share: float) -> Iterator[str]:
    """Every export line of one family, corruptions applied."""
    for member in sample_plan.members(plan, family):
        record = publication_record(plan, member)
        kind = corruption_of(plan, member.index, bad_share)
        if kind is None:
            yield json.dumps(record, ensure_ascii=False)
        else:
            yield from corrupt(
                record, kind, sample_plan.rng(plan.seed, sample_plan._S_BAD, member.index, 1)
            )


def family_corruptions(
    plan: sample_plan.CorpusPlan, family: int, bad_share: float
) -> Iterator[str]:
    """Corruption kinds of one family's members (cheap: no text is rendered)."""
    for member in sample_plan.members(plan, family):
        kind = corruption_of(plan, member.index, bad_share)
        yield kind or "clean"
