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
"""

from __future__ import annotations

import random
from bisect import bisect_right
from dataclasses import dataclass
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


@dataclass(frozen=True, eq=False)  # identity hash: the plan keys lru_caches
class CorpusPlan:
    """Driver-side plan, small enough to broadcast: member counts and cluster boundaries."""

    seed: int
    n_patents: int
    member_counts: tuple[int, ...]  # per family, after trimming to n_patents
    first_index: tuple[int, ...]  # global publication index of each family's first member
    cluster_starts: tuple[int, ...]  # first family of each cluster, plus a final sentinel
    n_fields: int

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


def build_plan(seed: int, n_patents: int) -> CorpusPlan:
    """Walk families until exactly ``n_patents`` publications exist."""
    if n_patents < 1:
        raise ValueError(f"--patents must be >= 1, got {n_patents}")
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
        counts.append(n)
        first.append(total)
        total += n
        family += 1
    starts.append(family)
    return CorpusPlan(
        seed, n_patents, tuple(counts), tuple(first), tuple(starts), len(load_glossary().fields)
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
def field_pool(seed: int, field_index: int) -> tuple[Term, ...]:
    g = load_glossary()
    return tuple(rng(seed, _S_FIELD, field_index).sample(g.components, FIELD_POOL_SIZE))


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


def cluster_field(plan: CorpusPlan, cluster: int) -> int:
    return cluster % plan.n_fields


def partner_cluster(plan: CorpusPlan, cluster: int) -> int | None:
    """The cluster sharing half of this cluster's core (Y references)."""
    tier = cluster // plan.n_fields
    other = cluster + plan.n_fields if tier % 2 == 0 else cluster - plan.n_fields
    return other if 0 <= other < plan.n_clusters else None


@lru_cache(maxsize=4096)
def cluster_core(plan: CorpusPlan, cluster: int) -> tuple[Term, Term, Term, tuple[Feature, ...]]:
    """(field, device, base component, core features) of a cluster."""
    g = load_glossary()
    field_index = cluster_field(plan, cluster)
    field = g.fields[field_index]
    pool = list(field_pool(plan.seed, field_index))
    pair = (cluster // plan.n_fields) // 2
    shared = rng(plan.seed, _S_SHARED, field_index, pair)
    base = shared.choice(pool)
    device = shared.choice(g.devices_of_field(field))
    shared_comps = shared.sample([c for c in pool if c != base], 2)
    shared_feats = _features(shared, shared_comps, [base])
    own = rng(plan.seed, _S_INVENTION, cluster)
    rest = [c for c in pool if c != base and c not in shared_comps]
    own_comps = own.sample(rest, 2)
    own_feats = _features(own, own_comps, [base, *shared_comps])
    return field, device, base, tuple(shared_feats + own_feats)


def invention(plan: CorpusPlan, family: int) -> Invention:
    field, device, base, core = cluster_core(plan, plan.cluster_of(family))
    g = load_glossary()
    r = rng(plan.seed, _S_FAMILY, family)
    pool = list(field_pool(plan.seed, cluster_field(plan, plan.cluster_of(family))))
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

    add(list(plan.families_of(cluster)), _X_LETTERS, 3)
    partner = partner_cluster(plan, cluster)
    if partner is not None:
        add(list(plan.families_of(partner)), _Y_LETTERS, 2)
    same_field = list(range(cluster_field(plan, cluster), plan.n_clusters, plan.n_fields))
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
