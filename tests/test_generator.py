"""The sample corpus generator: exact size, determinism, and a learnable X signal."""

import json
import re
from collections import Counter
from datetime import date

import pytest

from spark_jobs.lib.sample import plan as sample_plan
from spark_jobs.lib.sample import records as sample_records
from spark_jobs.lib.sample.glossary import load_glossary


@pytest.fixture(scope="module")
def plan():
    return sample_plan.build_plan(5, 600)


def test_glossary_has_hundreds_of_trilingual_terms():
    g = load_glossary()
    assert len(g) >= 300
    for kind in ("components", "materials", "relations", "functions", "fields", "devices"):
        for term in getattr(g, kind):
            assert term.en and re.search(r"[\u4e00-\u9fff]", term.zh), term
            assert re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", term.ja), term
    assert {f.key[0] for f in g.fields} == set("ABCDEFGH")
    assert all(g.devices_of_field(f) for f in g.fields)


@pytest.mark.parametrize("n", [1, 37, 600])
def test_plan_has_exactly_n_patents(n):
    plan = sample_plan.build_plan(5, n)
    assert sum(plan.member_counts) == n
    assert sum(len(sample_plan.members(plan, f)) for f in range(plan.n_families)) == n


def test_generation_is_deterministic_per_seed():
    def lines(seed):
        plan = sample_plan.build_plan(seed, 80)
        return [
            line
            for f in range(plan.n_families)
            for line in sample_records.family_lines(plan, f, 0.1)
        ]

    assert lines(3) == lines(3)
    assert lines(3) != lines(4)


def test_members_cover_offices_languages_and_dates(plan):
    members = [m for f in range(plan.n_families) for m in sample_plan.members(plan, f)]
    assert {m.country for m in members} == {"CN", "US", "EP", "JP", "WO"}
    assert {m.lang for m in members} == {"zh", "en", "ja"}
    assert all(m.publication_date > m.filing_date for m in members)
    assert min(m.filing_date for m in members) >= date(2010, 1, 1)
    assert max(m.filing_date for m in members) <= date(2026, 12, 31)
    assert len({m.publication_number for m in members}) == len(members)
    cross_lingual = [
        f for f in range(plan.n_families) if len({m.lang for m in sample_plan.members(plan, f)}) > 1
    ]
    assert len(cross_lingual) > plan.n_families * 0.2


def test_x_citations_are_earlier_same_cluster_and_disclose_the_core(plan):
    by_number = {
        m.publication_number: m
        for f in range(plan.n_families)
        for m in sample_plan.members(plan, f)
    }
    n_x = n_eval = n_cross = 0
    for citing in by_number.values():
        for c in sample_plan.citations(plan, citing):
            cited = by_number.get(c.publication_number)
            if cited is None:
                continue
            assert cited.publication_date < citing.filing_date
            letters = c.letters.upper()
            same_cluster = plan.cluster_of(cited.family) == plan.cluster_of(citing.family)
            if "X" in letters:
                n_x += 1
                assert same_cluster
                assert (
                    sample_plan.invention(plan, cited.family).core
                    == sample_plan.invention(plan, citing.family).core
                )
                n_eval += citing.filing_date >= date(2025, 1, 1)
                n_cross += cited.lang != citing.lang
            elif "Y" in letters:
                cited_core = set(sample_plan.invention(plan, cited.family).core)
                citing_core = set(sample_plan.invention(plan, citing.family).core)
                assert len(cited_core & citing_core) == 2  # the shared half only
    assert n_x > 100 and n_eval > 5 and n_cross > 20


def test_corruptions_follow_the_manifest_rules():
    plan = sample_plan.build_plan(9, 400)
    kinds = Counter(
        k for f in range(plan.n_families) for k in sample_records.family_corruptions(plan, f, 0.2)
    )
    lines = [ln for f in range(plan.n_families) for ln in sample_records.family_lines(plan, f, 0.2)]
    extra = kinds["duplicate_conflict"] + kinds[sample_records.EXACT_DUPLICATE]
    assert len(lines) == 400 + extra
    assert set(kinds) - {"clean"} == set(sample_records.CORRUPTIONS) | {
        sample_records.EXACT_DUPLICATE
    }
    bad_json = 0
    for line in lines:
        try:
            json.loads(line)
        except json.JSONDecodeError:
            bad_json += 1
    assert bad_json == kinds["bad_json"]
