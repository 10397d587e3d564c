"""Difficulty knobs of the sample corpus: defaults byte-identical, 'hard' measurably harder."""

import dataclasses
import hashlib
import json

import pytest

from spark_jobs.generate_sample import parse_args
from spark_jobs.lib.sample import plan as sample_plan
from spark_jobs.lib.sample import records as sample_records
from spark_jobs.lib.sample.claims_plan import claim_plan
from spark_jobs.lib.sample.glossary import load_glossary
from spark_jobs.lib.sample.render import render_patent

HARD = sample_plan.DIFFICULTY_PRESETS["hard"]
# sha256 of every line of build_plan(3, 80) at bad_share 0.1, as generated before the knobs
# existed: the defaults must keep the corpus byte-identical.
GOLDEN_3_80 = "5b66160bdd62b2f04c094a205273cbf1dd5b3fd7f42388abba9ac765f51ca06f"


def _lines(plan, bad_share=0.1):
    return [
        line
        for f in range(plan.n_families)
        for line in sample_records.family_lines(plan, f, bad_share)
    ]


def _plan_fields(plan):
    return {f.name: getattr(plan, f.name) for f in dataclasses.fields(plan)}


def _by_number(plan):
    return {
        m.publication_number: m
        for f in range(plan.n_families)
        for m in sample_plan.members(plan, f)
    }


def _components(core):
    return {f.component for f in core}


def test_defaults_reproduce_the_original_corpus():
    default = sample_plan.build_plan(3, 80)
    assert default.difficulty == sample_plan.Difficulty() == sample_plan.DIFFICULTY_PRESETS["easy"]
    assert not default.distractors
    digest = hashlib.sha256("\n".join(_lines(default)).encode()).hexdigest()
    assert digest == GOLDEN_3_80


def test_plan_without_difficulty_equals_explicit_default():
    implicit = sample_plan.build_plan(5, 300)
    explicit = sample_plan.build_plan(5, 300, sample_plan.Difficulty())
    preset = sample_plan.build_plan(5, 300, sample_plan.DIFFICULTY_PRESETS["easy"])
    assert _plan_fields(implicit) == _plan_fields(explicit) == _plan_fields(preset)
    for family in (0, 1, 7, implicit.n_families // 2, implicit.n_families - 1):
        assert sample_plan.invention(implicit, family) == sample_plan.invention(explicit, family)
        assert list(sample_records.family_lines(implicit, family, 0.1)) == list(
            sample_records.family_lines(explicit, family, 0.1)
        )
        for member in sample_plan.members(implicit, family):
            assert (
                sample_plan.abstract_core(implicit, sample_plan.invention(implicit, family), member)
                is None
            )


def test_hard_changes_the_texts_but_is_deterministic_per_seed():
    easy = _lines(sample_plan.build_plan(3, 120), 0.0)
    hard = _lines(sample_plan.build_plan(3, 120, HARD), 0.0)
    assert len(easy) == len(hard) == 120  # same size, same members
    easy_rec = [json.loads(line) for line in easy]
    hard_rec = [json.loads(line) for line in hard]
    assert [r["publication_number"] for r in easy_rec] == [
        r["publication_number"] for r in hard_rec
    ]
    changed = sum(
        e["abstract_localized"] != h["abstract_localized"]
        or e["claims_localized"] != h["claims_localized"]
        for e, h in zip(easy_rec, hard_rec, strict=True)
    )
    assert changed > 100
    assert hard == _lines(sample_plan.build_plan(3, 120, HARD), 0.0)
    assert hard != _lines(sample_plan.build_plan(4, 120, HARD), 0.0)


@pytest.mark.parametrize(("core", "shared"), [(4, 2), (5, 3), (4, 1), (3, 3)])
def test_partner_clusters_share_the_configured_core(core, shared):
    plan = sample_plan.build_plan(
        11, 800, sample_plan.Difficulty(core_features=core, shared_core=shared)
    )
    pairs = 0
    for cluster in range(plan.n_clusters):
        partner = sample_plan.partner_cluster(plan, cluster)
        if partner is None:
            continue
        mine = sample_plan.cluster_core(plan, cluster)[3]
        theirs = sample_plan.cluster_core(plan, partner)[3]
        assert len(mine) == len(theirs) == core
        assert mine[:shared] == theirs[:shared]
        assert len(set(mine) & set(theirs)) == shared
        pairs += 1
    assert pairs > 20
    # Y citations (no noise here) point at families sharing exactly that many features
    by_number = _by_number(plan)
    n_y = 0
    for citing in by_number.values():
        for c in sample_plan.citations(plan, citing):
            cited = by_number.get(c.publication_number)
            if cited is not None and "Y" in c.letters.upper() and "X" not in c.letters.upper():
                a = set(sample_plan.invention(plan, cited.family).core)
                b = set(sample_plan.invention(plan, citing.family).core)
                assert len(a & b) == shared
                n_y += 1
    assert n_y > 20


def test_fewer_fields_and_a_smaller_pool_crowd_a_field():
    d = sample_plan.Difficulty(fields=6, field_pool=12)
    plan = sample_plan.build_plan(2, 800, d)
    assert plan.n_fields == 6
    g = load_glossary()
    fields = {sample_plan.cluster_core(plan, c)[0] for c in range(plan.n_clusters)}
    assert len(fields) == 6
    assert len({f.key[0] for f in fields}) >= 4  # spread over IPC sections, not the first 6
    per_field: dict = {}
    for family in range(plan.n_families):
        cluster = plan.cluster_of(family)
        inv = sample_plan.invention(plan, family)
        pool = set(sample_plan.field_pool(plan.seed, sample_plan.cluster_field(plan, cluster), 12))
        assert set(inv.components) <= pool
        per_field.setdefault(inv.field, set()).update(inv.components)
    assert all(len(comps) <= 12 for comps in per_field.values())
    # the default spreads a field's clusters over 45 of the glossary's components
    assert len(g.components) > 45
    assert plan.n_clusters / plan.n_fields > 3 * sample_plan.build_plan(2, 800).n_clusters / len(
        g.fields
    )


def test_paraphrase_noise_varies_one_core_feature_and_keeps_x_in_the_cluster():
    base = sample_plan.build_plan(8, 800)
    noisy = sample_plan.build_plan(8, 800, sample_plan.Difficulty(paraphrase_noise=0.5))
    assert _plan_fields(base) | {"difficulty": None} == _plan_fields(noisy) | {"difficulty": None}
    varied = 0
    for family in range(noisy.n_families):
        cluster_core = sample_plan.cluster_core(noisy, noisy.cluster_of(family))[3]
        inv = sample_plan.invention(noisy, family)
        if inv.core != cluster_core:
            varied += 1
            # one feature dropped, or one component replaced
            assert len(_components(cluster_core) - _components(inv.core)) == 1
            assert len(_components(inv.core) - _components(cluster_core)) <= 1
            assert len(inv.core) >= 2
            anchors = {inv.base} | _components(inv.core + inv.extras)
            assert all(f.anchor in anchors for f in inv.core + inv.extras)
        else:
            assert inv == sample_plan.invention(base, family)  # untouched families are unchanged
    assert 0.35 < varied / noisy.n_families < 0.65
    by_number = _by_number(noisy)
    for citing in by_number.values():
        for c in sample_plan.citations(noisy, citing):
            cited = by_number.get(c.publication_number)
            if cited is not None and "X" in c.letters.upper():
                assert noisy.cluster_of(cited.family) == noisy.cluster_of(citing.family)


def test_abstract_omission_leaves_core_features_out_of_the_abstract_only():
    plan = sample_plan.build_plan(4, 300, sample_plan.Difficulty(abstract_omission=0.5))
    omitted = total = 0
    for family in range(plan.n_families):
        inv = sample_plan.invention(plan, family)
        claims = claim_plan(inv, sample_plan.rng(plan.seed, sample_plan._S_TEXT, family))
        for member in sample_plan.members(plan, family):
            total += 1
            record = sample_records.publication_record(plan, member)
            r = sample_plan.rng(plan.seed, sample_plan._S_TEXT, family, member.index)
            full = render_patent(inv, claims, member.lang, r)
            assert record["claims_localized"][0]["text"] == full["claims"]
            assert record["description_localized"][0]["text"] == full["description"]
            kept = sample_plan.abstract_core(plan, inv, member)
            if kept is None:
                assert record["abstract_localized"][0]["text"] == full["abstract"]
                continue
            omitted += 1
            assert 1 <= len(inv.core) - len(kept) <= len(inv.core) // 2
            assert record["abstract_localized"][0]["text"] != full["abstract"]
            assert len(record["abstract_localized"][0]["text"]) < len(full["abstract"])
    assert 0.35 < omitted / total < 0.65


def test_distractors_are_unclustered_hard_negatives():
    share = 0.2
    plain = sample_plan.build_plan(6, 1200)
    plan = sample_plan.build_plan(6, 1200, sample_plan.Difficulty(distractor_share=share))
    # distractors come from their own stream: clusters and members do not move
    assert plan.cluster_starts == plain.cluster_starts
    assert plan.member_counts == plain.member_counts
    assert 0.6 * share < len(plan.distractors) / plan.n_families < 1.4 * share
    for family in plan.distractors:
        field, device, base, core = sample_plan.cluster_core(plan, plan.cluster_of(family))
        inv = sample_plan.invention(plan, family)
        assert (inv.field, inv.device, inv.base) == (field, device, base)  # same vocabulary
        shared = _components(inv.core) & _components(core)
        assert len(shared) == len(core) - sample_plan.DISTRACTOR_SWAPS  # a near miss, not the core
        assert len(inv.core) == len(core)
    by_number = _by_number(plan)
    n_x = n_a_to_distractor = 0
    for citing in by_number.values():
        for c in sample_plan.citations(plan, citing):
            letters = c.letters.upper()
            if citing.family in plan.distractors:
                assert "X" not in letters  # no X citations of their own
            cited = by_number.get(c.publication_number)
            if cited is None:
                continue
            if "X" in letters or "Y" in letters:
                assert cited.family not in plan.distractors  # nobody cites them as X/Y
                assert citing.family not in plan.distractors
                n_x += "X" in letters
            elif cited.family in plan.distractors and "A" in letters:
                n_a_to_distractor += 1
    assert n_x > 100
    assert n_a_to_distractor > 0  # still cited as mere background (A)


def test_distractors_get_no_x_citation_in_the_records():
    plan = sample_plan.build_plan(6, 400, sample_plan.Difficulty(distractor_share=0.3))
    assert plan.distractors
    for family in sorted(plan.distractors):
        for member in sample_plan.members(plan, family):
            record = sample_records.publication_record(plan, member)
            # one of type/category holds the search-report source (EXA, ...), the other letters
            fields = {v for c in record["citation"] for v in (c["type"], c["category"])}
            assert fields and not any("X" in v.upper() for v in fields - set(sample_plan._SOURCES))


def test_hard_preset_is_harder_on_every_knob():
    easy = sample_plan.Difficulty()
    assert HARD.core_features > easy.core_features
    assert HARD.shared_core / HARD.core_features > easy.shared_core / easy.core_features
    assert HARD.field_pool < easy.field_pool
    assert 0 < HARD.fields < len(load_glossary().fields)
    assert HARD.paraphrase_noise > 0 and HARD.abstract_omission > 0
    assert HARD.distractor_share > 0
    plan = sample_plan.build_plan(1, 600, HARD)
    assert plan.difficulty is HARD and plan.distractors
    assert (
        sum(
            sample_plan.invention(plan, f).core
            != sample_plan.cluster_core(plan, plan.cluster_of(f))[3]
            for f in range(plan.n_families)
        )
        > plan.n_families * 0.3
    )


@pytest.mark.parametrize(
    "knobs",
    [
        {"core_features": 1},
        {"shared_core": 5},
        {"shared_core": -1},
        {"field_pool": 7},
        {"fields": -1},
        {"paraphrase_noise": 1.0},
        {"abstract_omission": -0.1},
        {"distractor_share": 1.5},
    ],
)
def test_invalid_knobs_are_rejected(knobs):
    with pytest.raises(ValueError):
        sample_plan.Difficulty(**knobs)


def test_glossary_bounds_are_checked():
    with pytest.raises(ValueError, match="fields"):
        sample_plan.build_plan(
            1, 10, sample_plan.Difficulty(fields=len(load_glossary().fields) + 1)
        )
    with pytest.raises(ValueError, match="field_pool"):
        sample_plan.build_plan(
            1, 10, sample_plan.Difficulty(field_pool=len(load_glossary().components) + 1)
        )


def test_cli_flags_and_preset():
    _, d = parse_args(["--out", "x"])
    assert d == sample_plan.Difficulty()
    _, d = parse_args(["--out", "x", "--difficulty", "hard"])
    assert d == HARD
    _, d = parse_args(
        ["--out", "x", "--difficulty", "hard", "--distractor-share", "0", "--fields", "0"]
    )
    assert d == dataclasses.replace(HARD, distractor_share=0.0, fields=0)
    _, d = parse_args(
        [
            "--out", "x", "--core-features", "6", "--shared-core", "4", "--field-pool", "20",
            "--paraphrase-noise", "0.25", "--abstract-omission", "0.1",
        ]
    )  # fmt: skip
    assert d == sample_plan.Difficulty(
        core_features=6, shared_core=4, field_pool=20, paraphrase_noise=0.25, abstract_omission=0.1
    )
    for bad in (["--shared-core", "9"], ["--fields", "999"], ["--difficulty", "extreme"]):
        with pytest.raises(SystemExit):
            parse_args(["--out", "x", *bad])


@pytest.mark.spark
def test_manifest_records_the_difficulty(spark, tmp_path):
    from spark_jobs.lib.sample.generate import generate

    out = str(tmp_path / "sample")
    manifest = generate(spark, out, n_patents=60, seed=3, bad_share=0.0, difficulty=HARD)
    assert manifest["difficulty"] == dataclasses.asdict(HARD)
    plan = sample_plan.build_plan(3, 60, HARD)
    assert manifest["distractor_families"] == len(plan.distractors) > 0
    written = json.loads((tmp_path / "sample" / "_manifest.json").read_text())
    assert written["difficulty"] == manifest["difficulty"]
    assert manifest["clean_records"] == 60


@pytest.mark.spark
def test_a_rerun_replaces_its_sample_and_a_folder_of_other_files_is_refused(spark, tmp_path):
    """Spark's overwrite deletes the folder first: `--out ~/data` deleted whatever was there
    (a real export, say). The generator now refuses a folder holding anything but a sample."""
    from spark_jobs.lib.sample.generate import generate

    out = tmp_path / "sample"
    first = generate(spark, str(out), n_patents=60, seed=3, bad_share=0.0)
    again = generate(spark, str(out), n_patents=60, seed=3, bad_share=0.0)  # its own: replaced
    assert again["clean_records"] == first["clean_records"] == 60
    (out / "export.jsonl.gz").write_bytes(b"not ours")
    with pytest.raises(ValueError, match=r"holds 1 entries that are not a generated sample"):
        generate(spark, str(out), n_patents=60, seed=3, bad_share=0.0)
    assert (out / "export.jsonl.gz").read_bytes() == b"not ours" and (
        out / "_manifest.json"
    ).exists()
