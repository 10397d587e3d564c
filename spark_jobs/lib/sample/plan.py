"""The corpus plan: families, their members and inventions, and who cites whom.

Everything here is a pure function of (seed, family index) plus a small plan computed once
on the driver (member counts and technology clusters), so Spark executors can generate any
family independently and identically.

Relevance model (what makes the X signal learnable and cross-lingual):
- families are grouped into technology *clusters*; every family of a cluster claims the
  cluster's distinguishing combination of features (its *core*), so an earlier-published
  family of the same cluster is an X reference;
- two *partner* clusters of one field share half of their core: Y references;
- other clusters of the same IPC field share only vocabulary: A references.
Members of one family express one invention in their own language (CN zh, JP ja, US/EP en,
WO the priority language), so X references routinely cross languages.

``Difficulty`` (carried on the plan) makes X retrieval harder: bigger or more widely shared
cores, fewer fields and smaller field vocabularies (near-identical neighbours), paraphrase
noise (a family's text drops or replaces a core feature, an abstract leaves some out) and
distractor families (hard negatives next to a cluster, cited by nobody as X). Its defaults
reproduce the original corpus byte for byte: every knob at its default takes no extra random
draw and changes no existing one; the extra decisions come from streams of their own.
"""

from __future__ import annotations

import random
from bisect import bisect_right
from dataclasses import asdict, dataclass, replace
from datetime import date, timedelta
from functools import lru_cache

from spark_jobs.lib.sample.glossary import Term, load_glossary

FIRST_FILING = date(2010, 1, 1)
LAST_FILING = date(2026, 6, 30)
DATA_CUT = date(2026, 11, 1)  # nothing published after this day is in the export
NEW_CLUSTER_PROBABILITY = 0.3  # mean cluster size ~3.3 families
FIELD_POOL_SIZE = 45  # components a field draws from

# Streams keep independent random decisions independent of each other.
_S_SKELETON, _S_CLUSTER, _S_INVENTION, _S_FAMILY, _S_CITES, _S_TEXT, _S_BAD = range(7)
_S_FIELD, _S_SHARED = 7, 8
_S_NOISE, _S_DISTRACTOR, _S_ABSTRACT = 9, 10, 11  # used only when a Difficulty knob is on
DISTRACTOR_SWAPS = 2  # core features a distractor family replaces (noise changes at most one)

COUNTRY_LANG = {"CN": "zh", "JP": "ja", "US": "en", "EP": "en"}
# Priority office -> probability that the family also files in each other office.
_ROUTES = {
    "CN": {"US": 0.40, "EP": 0.20, "JP": 0.15, "WO": 0.30},
    "US": {"CN": 0.25, "EP": 0.40, "JP": 0.25, "WO": 0.40},
    "JP": {"US": 0.45, "CN": 0.30, "EP": 0.20, "WO": 0.30},
}
_PRIORITY_OFFICES = (("CN", 0.40), ("US", 0.30), ("JP", 0.30))


def rng(seed: int, stream: int, *keys: int) -> random.Random:
    """A deterministic generator for (seed, stream, keys); never Python's hash()."""
    value = seed * 1_000_003 + stream
    for key in keys:
        value = value * 10_000_019 + key
    return random.Random(value)


def _days(d: date) -> int:
    return d.toordinal()


@dataclass(frozen=True)
class MemberSkeleton:
    country: str
    filing_date: date
    publication_date: date


def family_skeleton(seed: int, family: int) -> tuple[date, str, tuple[MemberSkeleton, ...]]:
    """Priority date, priority office and the members published by DATA_CUT (may be none)."""
    r = rng(seed, _S_SKELETON, family)
    priority = date.fromordinal(r.randint(_days(FIRST_FILING), _days(LAST_FILING)))
    office = r.choices([o for o, _ in _PRIORITY_OFFICES], [w for _, w in _PRIORITY_OFFICES])[0]
    countries = [office] + [c for c, p in _ROUTES[office].items() if r.random() < p]
    members = []
    for i, country in enumerate(countries):
        filing = priority if i == 0 else priority + timedelta(days=r.randint(30, 365))
        filing = min(filing, LAST_FILING)
        published = filing + timedelta(days=r.randint(180, 640))
        if published <= DATA_CUT:
            members.append(MemberSkeleton(country, filing, published))
    return priority, office, tuple(members)


@dataclass(frozen=True)
class Difficulty:
    """How hard X retrieval on the corpus is; the defaults are the original ("easy") corpus."""

    core_features: int = 4  # features in a cluster's distinguishing combination (its core)
    shared_core: int = 2  # of those, shared with the partner cluster (Y references)
    field_pool: int = FIELD_POOL_SIZE  # components a field draws from: smaller, more reuse
    fields: int = 0  # IPC fields the clusters are spread over; 0: every glossary field
    paraphrase_noise: float = 0.0  # P(a family's text drops or replaces one core feature)
    abstract_omission: float = 0.0  # P(a member's abstract leaves some core features out)
    distractor_share: float = 0.0  # share of families in no cluster: hard negatives

    def __post_init__(self):
        if self.core_features < 2:
            raise ValueError(f"core_features must be >= 2, got {self.core_features}")
        if not 0 <= self.shared_core <= self.core_features:
            raise ValueError(
                f"shared_core must be in [0, core_features={self.core_features}], "
                f"got {self.shared_core}"
            )
        if self.field_pool < self.core_features + 4:  # base + core + up to 3 extras
            raise ValueError(
                f"field_pool must be >= core_features + 4 = {self.core_features + 4}, "
                f"got {self.field_pool}"
            )
        if self.fields < 0:
            raise ValueError(f"fields must be >= 0 (0: all), got {self.fields}")
        for name in ("paraphrase_noise", "abstract_omission", "distractor_share"):
            if not 0 <= getattr(self, name) < 1:
                raise ValueError(f"{name} must be in [0, 1), got {getattr(self, name)}")

    def as_dict(self) -> dict:
        return asdict(self)

    def check_glossary(self) -> None:
        """The bounds the built-in glossary sets (ValueError when exceeded)."""
        g = load_glossary()
        if self.fields > len(g.fields):
            raise ValueError(
                f"fields must be <= {len(g.fields)} (the glossary's), got {self.fields}"
            )
        if self.field_pool > len(g.components):
            raise ValueError(
                f"field_pool must be <= {len(g.components)} (the glossary's), got {self.field_pool}"
            )


DIFFICULTY_PRESETS = {
    "easy": Difficulty(),
    "hard": Difficulty(
        core_features=5,
        shared_core=3,
        field_pool=16,
        fields=8,
        paraphrase_noise=0.4,
        abstract_omission=0.5,
        distractor_share=0.15,
    ),
}


@dataclass(frozen=True, eq=False)  # identity hash: the plan keys lru_caches
class CorpusPlan:
    """Driver-side plan, small enough to broadcast: member counts and cluster boundaries."""

    seed: int
    n_patents: int
    member_counts: tuple[int, ...]  # per family, after trimming to n_patents
    first_index: tuple[int, ...]  # global publication index of each family's first member
    cluster_starts: tuple[int, ...]  # first family of each cluster, plus a final sentinel
    n_fields: int
    difficulty: Difficulty = Difficulty()
    distractors: frozenset[int] = frozenset()  # families in no cluster

    @property
    def n_families(self) -> int:
        return len(self.member_counts)

    @property
    def n_clusters(self) -> int:
        return len(self.cluster_starts) - 1

    def cluster_of(self, family: int) -> int:
        return bisect_right(self.cluster_starts, family) - 1

    def families_of(self, cluster: int) -> range:
        return range(self.cluster_starts[cluster], self.cluster_starts[cluster + 1])

    def relevant_families_of(self, cluster: int) -> list[int]:
        """The cluster's families that claim its core (distractors excluded)."""
        families = self.families_of(cluster)
        if not self.distractors:
            return list(families)
        return [f for f in families if f not in self.distractors]

    def is_distractor(self, family: int) -> bool:
        return family in self.distractors


def build_plan(seed: int, n_patents: int, difficulty: Difficulty | None = None) -> CorpusPlan:
    """Walk families until exactly ``n_patents`` publications exist.

    Distractor families are drawn from their own stream, so cluster boundaries and member
    counts do not depend on the difficulty.
    """
    if n_patents < 1:
        raise ValueError(f"--patents must be >= 1, got {n_patents}")
    d = Difficulty() if difficulty is None else difficulty
    d.check_glossary()
    distractors: list[int] = []
    counts: list[int] = []
    first: list[int] = []
    starts: list[int] = [0]
    total = 0
    family = 0
    while total < n_patents:
        _, _, members = family_skeleton(seed, family)
        n = min(len(members), n_patents - total)
        if family > 0 and rng(seed, _S_CLUSTER, family).random() < NEW_CLUSTER_PROBABILITY:
            starts.append(family)
        if (
            d.distractor_share > 0
            and rng(seed, _S_DISTRACTOR, family).random() < d.distractor_share
        ):
            distractors.append(family)
        counts.append(n)
        first.append(total)
        total += n
        family += 1
    starts.append(family)
    return CorpusPlan(
        seed,
        n_patents,
        tuple(counts),
        tuple(first),
        tuple(starts),
        d.fields or len(load_glossary().fields),
        d,
        frozenset(distractors),
    )


# --- inventions ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Feature:
    """One claimed element: a component related to an anchor, optionally material/function."""

    component: Term
    relation: Term
    anchor: Term
    material: Term | None
    function: Term | None


@dataclass(frozen=True)
class Parameter:
    component: Term
    parameter: Term
    low: float
    high: float


@dataclass(frozen=True)
class Invention:
    field: Term
    device: Term
    base: Term
    core: tuple[Feature, ...]  # the distinguishing combination, shared within the cluster
    extras: tuple[Feature, ...]  # family-specific refinements (dependent claims)
    parameters: tuple[Parameter, ...]
    method_steps: tuple[tuple[Term, Term], ...]  # (step, component); empty: no method claim
    purpose: Term

    @property
    def components(self) -> list[Term]:
        return [self.base] + [f.component for f in self.core + self.extras]


@lru_cache(maxsize=64)
def field_pool(seed: int, field_index: int, size: int = FIELD_POOL_SIZE) -> tuple[Term, ...]:
    g = load_glossary()
    return tuple(rng(seed, _S_FIELD, field_index).sample(g.components, size))


def _features(r: random.Random, comps: list[Term], anchors: list[Term]) -> list[Feature]:
    g = load_glossary()
    out = []
    for comp in comps:
        out.append(
            Feature(
                comp,
                r.choice(g.relations),
                r.choice(anchors),
                r.choice(g.materials) if r.random() < 0.5 else None,
                r.choice(g.functions) if r.random() < 0.35 else None,
            )
        )
        anchors = [*anchors, comp]
    return out


def field_slot(plan: CorpusPlan, cluster: int) -> int:
    """Which of the plan's ``n_fields`` fields the cluster is in (clusters go round-robin)."""
    return cluster % plan.n_fields


def cluster_field(plan: CorpusPlan, cluster: int) -> int:
    """The glossary index of the cluster's field (fewer fields are spread over sections A-H)."""
    n_glossary = len(load_glossary().fields)
    return field_slot(plan, cluster) * n_glossary // plan.n_fields


def _pool(plan: CorpusPlan, cluster: int) -> tuple[Term, ...]:
    return field_pool(plan.seed, cluster_field(plan, cluster), plan.difficulty.field_pool)


def partner_cluster(plan: CorpusPlan, cluster: int) -> int | None:
    """The cluster sharing ``shared_core`` of this cluster's core features (Y references)."""
    tier = cluster // plan.n_fields
    other = cluster + plan.n_fields if tier % 2 == 0 else cluster - plan.n_fields
    return other if 0 <= other < plan.n_clusters else None


@lru_cache(maxsize=4096)
def cluster_core(plan: CorpusPlan, cluster: int) -> tuple[Term, Term, Term, tuple[Feature, ...]]:
    """(field, device, base component, core features) of a cluster."""
    g = load_glossary()
    d = plan.difficulty
    field_index = cluster_field(plan, cluster)
    field = g.fields[field_index]
    pool = list(_pool(plan, cluster))
    pair = (cluster // plan.n_fields) // 2
    shared = rng(plan.seed, _S_SHARED, field_index, pair)
    base = shared.choice(pool)
    device = shared.choice(g.devices_of_field(field))
    shared_comps = shared.sample([c for c in pool if c != base], d.shared_core)
    shared_feats = _features(shared, shared_comps, [base])
    own = rng(plan.seed, _S_INVENTION, cluster)
    rest = [c for c in pool if c != base and c not in shared_comps]
    own_comps = own.sample(rest, d.core_features - d.shared_core)
    own_feats = _features(own, own_comps, [base, *shared_comps])
    return field, device, base, tuple(shared_feats + own_feats)


def _replace_feature(
    r: random.Random, core: tuple[Feature, ...], i: int, pool: list[Term], avoid: set[Term]
) -> tuple[Feature, ...]:
    """``core`` with feature ``i`` swapped for a new component (same anchor); its dependents
    are re-anchored on the new component."""
    old = core[i]
    comp = r.choice([c for c in pool if c not in avoid])
    avoid.add(comp)
    new = _features(r, [comp], [old.anchor])[0]
    return tuple(
        new if j == i else replace(f, anchor=comp) if f.anchor == old.component else f
        for j, f in enumerate(core)
    )


def _drop_feature(core: tuple[Feature, ...], i: int) -> tuple[Feature, ...]:
    """``core`` without feature ``i``; its dependents are re-anchored on its own anchor."""
    old = core[i]
    return tuple(
        replace(f, anchor=old.anchor) if f.anchor == old.component else f
        for j, f in enumerate(core)
        if j != i
    )


def family_core(
    plan: CorpusPlan, family: int, base: Term, core: tuple[Feature, ...]
) -> tuple[Feature, ...]:
    """The core as the family's text states it: the cluster's, unless a knob varies it.

    A distractor replaces ``DISTRACTOR_SWAPS`` of the cluster's core features (same field,
    device and base: a near miss, not an X reference); with paraphrase noise a cluster member
    drops or replaces one (still an X reference, worded differently).
    """
    d = plan.difficulty
    if family in plan.distractors:
        r = rng(plan.seed, _S_DISTRACTOR, family, 1)
        pool = list(_pool(plan, plan.cluster_of(family)))
        avoid = {base, *(f.component for f in core)}
        for i in sorted(r.sample(range(len(core)), min(DISTRACTOR_SWAPS, len(core)))):
            core = _replace_feature(r, core, i, pool, avoid)
        return core
    if d.paraphrase_noise > 0:
        r = rng(plan.seed, _S_NOISE, family)
        if r.random() < d.paraphrase_noise:
            i = r.randrange(len(core))
            if len(core) > 2 and r.random() < 0.5:
                return _drop_feature(core, i)
            pool = list(_pool(plan, plan.cluster_of(family)))
            return _replace_feature(r, core, i, pool, {base, *(f.component for f in core)})
    return core


def invention(plan: CorpusPlan, family: int) -> Invention:
    field, device, base, core = cluster_core(plan, plan.cluster_of(family))
    core = family_core(plan, family, base, core)
    g = load_glossary()
    r = rng(plan.seed, _S_FAMILY, family)
    pool = list(_pool(plan, plan.cluster_of(family)))
    used = {base, *(f.component for f in core)}
    extra_comps = r.sample([c for c in pool if c not in used], r.randint(2, 3))
    extras = _features(r, extra_comps, [base, *(f.component for f in core)])
    comps = [base, *(f.component for f in core + tuple(extras))]
    params = []
    for comp in r.sample(comps, r.randint(1, 3)):
        low = round(r.uniform(0.5, 50), 1)
        params.append(
            Parameter(comp, r.choice(g.parameters), low, round(low * r.uniform(1.5, 4), 1))
        )
    steps = ()
    if r.random() < 0.5:
        steps = tuple((r.choice(g.steps), c) for c in r.sample(comps, 3))
    purpose = next((f.function for f in core if f.function), None) or r.choice(g.functions)
    return Invention(field, device, base, core, tuple(extras), tuple(params), steps, purpose)


# --- members and citations ---------------------------------------------------------------


@dataclass(frozen=True)
class Member:
    index: int  # global publication index
    family: int
    country: str
    lang: str
    publication_number: str
    application_number: str
    kind_code: str
    filing_date: date
    publication_date: date
    priority_date: date
    english_abstract: bool  # also carries an English title/abstract (as Google adds)


def family_id(family: int) -> str:
    return str(30_000_000 + family)


def _number(country: str, index: int, published: date, granted: bool) -> tuple[str, str]:
    year = published.year
    if country == "CN":
        return f"CN-{110_000_000 + index}-{'B' if granted else 'A'}", "B" if granted else "A"
    if country == "US":
        if granted:
            return f"US-{10_000_000 + index}-B2", "B2"
        return f"US-{year}{index:07d}-A1", "A1"
    if country == "EP":
        return f"EP-{3_000_000 + index}-{'B1' if granted else 'A1'}", "B1" if granted else "A1"
    if country == "JP":
        return f"JP-{year}{index:06d}-A", "A"
    return f"WO-{year}{index:06d}-A1", "A1"


def abstract_core(plan: CorpusPlan, inv: Invention, member: Member) -> tuple[Feature, ...] | None:
    """The core features ``member``'s abstract states (None: all of them, the default).

    With ``abstract_omission`` a member's abstract leaves out 1 to half of the features.
    """
    share = plan.difficulty.abstract_omission
    if share <= 0:
        return None
    r = rng(plan.seed, _S_ABSTRACT, member.index)
    if r.random() >= share:
        return None
    n = len(inv.core)
    omit = set(r.sample(range(n), r.randint(1, max(1, n // 2))))
    return tuple(f for i, f in enumerate(inv.core) if i not in omit)


@lru_cache(maxsize=65536)
def members(plan: CorpusPlan, family: int) -> tuple[Member, ...]:
    """The family's published members (trimmed to the plan's patent count)."""
    priority, office, skeleton = family_skeleton(plan.seed, family)
    r = rng(plan.seed, _S_FAMILY, family, 1)
    priority_lang = COUNTRY_LANG[office]
    out = []
    for i, m in enumerate(skeleton[: plan.member_counts[family]]):
        index = plan.first_index[family] + i
        lang = COUNTRY_LANG.get(m.country, priority_lang)
        granted = m.country != "WO" and r.random() < 0.35
        number, kind = _number(m.country, index, m.publication_date, granted)
        application = f"{m.country}-{m.filing_date.year}{index:08d}-A"
        english = lang != "en" and r.random() < 0.3
        out.append(
            Member(
                index,
                family,
                m.country,
                lang,
                number,
                application,
                kind,
                m.filing_date,
                m.publication_date,
                priority,
                english,
            )
        )
    return tuple(out)


@dataclass(frozen=True)
class Citation:
    publication_number: str
    application_number: str
    npl_text: str
    letters: str  # raw relevance letters as a search report writes them ("" for applicant)
    source: str  # ISR, SEA, EXA, SUP, APP
    filing_date: int  # YYYYMMDD or 0


_X_LETTERS = ("X", "X", "X", "XY", "X,Y", "x", "XP", "X, Y", "PX")
_Y_LETTERS = ("Y", "Y", "YA", "Y,A", "y")
_A_LETTERS = ("A", "A", "a", "AD", "A,D")
_SOURCES = ("ISR", "ISR", "SEA", "SEA", "EXA", "SUP")
_FOREIGN = ("DE", "GB", "FR", "KR")
_NPL = (
    "SMITH J. et al., 'Design considerations for {t}', Journal of Applied Engineering, {y}",
    "WANG L., 'A study of {t}', Proceedings of the International Conference on Devices, {y}",
    "TANAKA H., '{t} in practice', Technical Report, {y}",
)


def _cite_member(plan: CorpusPlan, family: int, before: date, lang: str, r) -> Member | None:
    """A member of ``family`` published before ``before`` (same language preferred)."""
    candidates = [m for m in members(plan, family) if m.publication_date < before]
    if not candidates:
        return None
    same = [m for m in candidates if m.lang == lang]
    return r.choice(same) if same and r.random() < 0.5 else r.choice(candidates)


def _as_citation(m: Member, letters: str, source: str) -> Citation:
    return Citation(
        m.publication_number,
        m.application_number,
        "",
        letters,
        source,
        int(m.filing_date.strftime("%Y%m%d")),
    )


def citations(plan: CorpusPlan, member: Member) -> list[Citation]:
    """X (same cluster), Y (partner cluster), A (same field), applicant, unresolved and NPL."""
    r = rng(plan.seed, _S_CITES, member.index)
    family = member.family
    cluster = plan.cluster_of(family)
    distractor = plan.is_distractor(family)  # claims no cluster's core: no X or Y of its own
    out: list[Citation] = []

    def add(families, letters, cap):
        chosen = [f for f in families if f != family]
        r.shuffle(chosen)
        n = 0
        for f in chosen:
            m = _cite_member(plan, f, member.filing_date, member.lang, r)
            if m is not None:
                out.append(_as_citation(m, r.choice(letters), r.choice(_SOURCES)))
                n += 1
                if n >= cap:
                    break

    if not distractor:
        add(plan.relevant_families_of(cluster), _X_LETTERS, 3)
    partner = partner_cluster(plan, cluster)
    if partner is not None and not distractor:
        add(plan.relevant_families_of(partner), _Y_LETTERS, 2)
    same_field = list(range(field_slot(plan, cluster), plan.n_clusters, plan.n_fields))
    a_clusters = r.sample(same_field, min(4, len(same_field)))
    add([r.choice(plan.families_of(c)) for c in a_clusters if c != cluster], _A_LETTERS, 3)
    if family > 0:  # applicant citations: anything earlier, no relevance letters
        add([r.randrange(family) for _ in range(r.randint(0, 2))], ("",), 2)
    for i in range(r.randint(1, 3)):  # prior art outside the corpus: stays unresolved
        country = r.choice((*_FOREIGN, "US"))
        if country == "US":
            number = f"US-{r.randint(4_000_000, 6_999_999)}-A"
        else:
            number = f"{country}-{r.randint(100_000, 9_999_999)}-A1"
        letters = r.choice(_A_LETTERS if i else _Y_LETTERS + _A_LETTERS)
        out.append(Citation(number, "", "", letters, r.choice(_SOURCES), 0))
    if r.random() < 0.3:
        inv = invention(plan, family)
        text = r.choice(_NPL).format(t=inv.field.en, y=r.randint(1995, 2020))
        out.append(Citation("", "", text, r.choice(_A_LETTERS), "SEA", 0))
    return out
