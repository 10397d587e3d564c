"""Stage I weakly supervised pairs (paper 4.2) from silver/views, as key-only rows.

Texts stay in silver/views; a pair names its two views by (publication, language, view).
All steps are built-in Spark expressions (joins, hashes, aggregates): no Python UDFs.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from schemas import defaults
from spark_jobs.lib.sampling import uniform

# relation of a pair type's two sides -> the signal its pairs carry (gold/stage1_pairs.signal)
SIGNAL = {
    "same_patent": "cross_section",  # two views of one patent in one language
    "family_cross_language": "cross_language",  # one view of two family members, two languages
    "taxonomy": "taxonomy",  # TACs of two families sharing an IPC subclass
    "citation": "citation",  # TACs of a citing and a cited patent of two families
}
# R3 as paper 001 (section 2) describes paper 002's recipe: each patent's abstract with its
# first independent claim; R4 pools those cross-section pairs with taxonomy and citation pairs
_R3 = {"ABS-FIC": ("ABS", "FIC", "same_patent")}
# recipe -> pair type -> (anchor view, positive view, how the two sides relate); README
# "Training recipes" defines each.
RECIPES: dict[str, dict[str, tuple[str, str, str]]] = {
    "xembed": {
        "ABS-CLAIM": ("ABS", "CLAIM", "same_patent"),
        "CLAIM-DESC": ("CLAIM", "DESC", "same_patent"),
        "ABS-ABS": ("ABS", "ABS", "family_cross_language"),
        "CLAIM-CLAIM": ("CLAIM", "CLAIM", "family_cross_language"),
    },
    "r3": _R3,
    "r4": {
        **_R3,
        "TAXONOMY": ("TAC", "TAC", "taxonomy"),
        "CITATION": ("TAC", "TAC", "citation"),
    },
    # citation pairs and views of the same patent (paper 001, section 2, on paper 000)
    "qaecter": {
        "CITATION": ("TAC", "TAC", "citation"),
        "ABS-CLAIM": ("ABS", "CLAIM", "same_patent"),
        "ABS-DESC": ("ABS", "DESC", "same_patent"),
        "CLAIM-DESC": ("CLAIM", "DESC", "same_patent"),
    },
}
PAIR_TYPES = tuple(sorted({t for types in RECIPES.values() for t in types}))
PAIR_COLUMNS = (
    "recipe",
    "pair_type",
    "signal",
    "anchor_id",
    "anchor_lang",
    "anchor_view",
    "positive_id",
    "positive_lang",
    "positive_view",
    "family_id",
    "positive_family_id",
)
_SIDE_COLUMNS = PAIR_COLUMNS[3:9]  # anchor_* and positive_* keys


def needs_graph(recipe: str) -> bool:
    """True when ``recipe`` has taxonomy or citation pairs (they read patents and citations)."""
    return any(r in ("taxonomy", "citation") for _, _, r in RECIPES[recipe].values())


def view_keys(views: DataFrame) -> DataFrame:
    """The columns pairing needs: keys and the SHA-256 of the text (for identity checks).

    The hash is curate's (silver/views.text_sha256), so the texts are not read; a table
    written before it had that column is hashed here.
    """
    keys = ["publication_number", "family_id", "lang", "view"]
    if "text_sha256" in views.columns:
        return views.where(F.col("n_chars") > 0).select(
            *keys, F.col("text_sha256").alias("text_hash")
        )
    return views.where(F.length(F.trim("text")) > 0).select(
        *keys, F.sha2("text", 256).alias("text_hash")
    )


def _side(keys: DataFrame, view: str, prefix: str) -> DataFrame:
    return keys.where(F.col("view") == view).select(
        F.col("publication_number").alias(f"{prefix}_id"),
        F.col("lang").alias(f"{prefix}_lang"),
        F.lit(view).alias(f"{prefix}_view"),
        F.col("family_id").alias(f"{prefix}_family"),
        F.col("text_hash").alias(f"{prefix}_hash"),
    )


def same_patent_pairs(
    keys: DataFrame, pair_type: str, anchor_view: str, positive_view: str
) -> DataFrame:
    """One pair per patent and language where both views exist."""
    a, p = _side(keys, anchor_view, "anchor"), _side(keys, positive_view, "positive")
    joined = a.join(p, (a.anchor_id == p.positive_id) & (a.anchor_lang == p.positive_lang))
    return joined.select(F.lit(pair_type).alias("pair_type"), *_pair_body())


def family_pairs(keys: DataFrame, patents: DataFrame, pair_type: str, view: str) -> DataFrame:
    """One pair per unordered pair of texts in two languages of two family members whose own
    languages differ (paper 4.2: "different-language members"). A member's language is its
    ``primary_lang`` in ``patents`` (the text's where it has none): two Chinese members that
    both carry an English translation are no cross-language pair."""
    a = _with_member_language(_side(keys, view, "anchor"), patents, "anchor")
    p = _with_member_language(_side(keys, view, "positive"), patents, "positive")
    joined = a.join(
        p,
        (a.anchor_family == p.positive_family)
        & (a.anchor_id < p.positive_id)
        & (a.anchor_lang != p.positive_lang)
        & (a.anchor_member_lang != p.positive_member_lang),
    )
    return joined.select(F.lit(pair_type).alias("pair_type"), *_pair_body())


def _with_member_language(side: DataFrame, patents: DataFrame, prefix: str) -> DataFrame:
    members = patents.select(
        F.col("publication_number").alias(f"{prefix}_id"),
        F.col("primary_lang").alias("_primary"),
    )
    return side.join(members, f"{prefix}_id", "left").select(
        *side.columns,
        F.coalesce("_primary", f"{prefix}_lang").alias(f"{prefix}_member_lang"),
    )


def _pair_body() -> list[Column]:
    return [
        *[F.col(c) for c in _SIDE_COLUMNS],
        F.col("anchor_family").alias("family_id"),
        F.col("positive_family").alias("positive_family_id"),
        "anchor_hash",
        "positive_hash",
    ]


def document_keys(keys: DataFrame, patents: DataFrame) -> DataFrame:
    """One TAC per patent for pairs across patents: the one in the patent's primary language,
    else the TAC of its smallest language code."""
    tac = keys.where(F.col("view") == "TAC").join(
        patents.select("publication_number", "primary_lang"), "publication_number"
    )
    first = Window.partitionBy("publication_number").orderBy(
        (F.col("lang") != F.coalesce(F.col("primary_lang"), F.lit(""))).cast("int"), "lang"
    )
    return (
        tac.withColumn("_r", F.row_number().over(first))
        .where(F.col("_r") == 1)
        .drop("_r", "primary_lang")
    )


def _document_pairs(docs: DataFrame, links: DataFrame, pair_type: str) -> DataFrame:
    """Pairs of TACs for ``links`` (anchor_id, positive_id, one row per pair) of two
    publications of different families."""
    a, p = _side(docs, "TAC", "anchor"), _side(docs, "TAC", "positive")
    joined = links.join(a, "anchor_id").join(p, "positive_id")
    return joined.where(F.col("anchor_family") != F.col("positive_family")).select(
        F.lit(pair_type).alias("pair_type"), *_pair_body()
    )


def ipc_subclasses(codes: Column) -> Column:
    """The distinct IPC subclasses (first 4 characters, upper case) of an array of IPC codes,
    sorted; codes shorter than a subclass are left out, a null array gives an empty one."""
    prefixes = F.transform(
        F.coalesce(codes, F.array().cast("array<string>")),
        lambda c: F.upper(F.substring(c, 1, 4)),
    )
    return F.array_sort(F.filter(F.array_distinct(prefixes), lambda c: F.length(c) == 4))


def taxonomy_pairs(
    docs: DataFrame, patents: DataFrame, pair_type: str, cap: int, seed: int
) -> DataFrame:
    """Two patents of different families sharing an IPC subclass (4 characters).

    Per subclass, one member per family (the smallest seeded hash) is kept and the families
    are chained in the order of a second seeded hash: each member pairs with the next, so a subclass of n
    families gives n - 1 pairs, of which the first ``cap`` are kept. Linear in the corpus,
    deterministic for a seed.
    """
    members = patents.join(
        docs.select("publication_number").distinct(), "publication_number"
    ).select(
        "publication_number",
        "family_id",
        F.explode(ipc_subclasses(F.col("ipc_codes"))).alias("subclass"),
    )
    members = members.withColumn("_u", uniform(seed, "subclass", "publication_number"))
    one_per_family = Window.partitionBy("subclass", "family_id").orderBy("_u", "publication_number")
    members = (
        members.withColumn("_r", F.row_number().over(one_per_family))
        .where(F.col("_r") == 1)
        .drop("_r")
    )
    # the chain's order is a draw of its own, per family: ordered by the member's number, a
    # family of many members (the smallest of many numbers) led the chain and its cap
    chain = Window.partitionBy("subclass").orderBy(
        uniform(seed, "subclass", "family_id", draw="chain"), "publication_number"
    )
    links = (
        members.withColumn("b", F.lead("publication_number").over(chain))
        .withColumn("_i", F.row_number().over(chain))
        .where(F.col("b").isNotNull() & (F.col("_i") <= cap))
        .select(F.col("publication_number").alias("a"), "b")
    )
    # a symmetric relation: one unordered pair, the smaller publication number the anchor
    unordered = links.select(
        F.least("a", "b").alias("anchor_id"), F.greatest("a", "b").alias("positive_id")
    ).distinct()
    return _document_pairs(docs, unordered, pair_type)


def citation_pairs(
    docs: DataFrame, patents: DataFrame, citations: DataFrame, pair_type: str, cutoff: str
) -> DataFrame:
    """Citing and cited patent of an X, Y or A citation resolved in the corpus, both published
    before the evaluation cutoff and of different families. The citing patent is the anchor
    (the query of the prior-art task) and the cited one the positive; two patents citing each
    other give one pair, anchored on the later published (then the smaller number)."""
    before = patents.where(F.col("publication_date") < F.to_date(F.lit(cutoff))).select(
        "publication_number", "publication_date"
    )
    links = (
        citations.where(F.col("resolved") & (F.col("is_x") | F.col("is_y") | F.col("is_a")))
        .select(F.col("citing").alias("a"), F.col("cited").alias("b"))
        .where(F.col("a") != F.col("b"))
        .join(before.withColumnRenamed("publication_number", "a"), "a")
        .join(before.select(F.col("publication_number").alias("b")), "b", "left_semi")
    )
    one = Window.partitionBy(F.least("a", "b"), F.greatest("a", "b")).orderBy(
        F.col("publication_date").desc(), "a"
    )
    oriented = (
        links.withColumn("_r", F.row_number().over(one))
        .where(F.col("_r") == 1)
        .select(F.col("a").alias("anchor_id"), F.col("b").alias("positive_id"))
    )
    return _document_pairs(docs, oriented, pair_type)


def candidate_pairs(
    keys: DataFrame,
    recipe: str,
    patents: DataFrame,
    citations: DataFrame | None = None,
    cutoff: str | None = None,
    taxonomy_cap: int = defaults.TAXONOMY_CAP,
    seed: int = 13,
) -> DataFrame:
    """Every pair of ``recipe`` with its signal and the two text hashes, before any dropping.

    Family pairs read the members' languages from ``patents``; taxonomy and citation pairs
    read it too (and ``citations`` and the evaluation ``cutoff``).
    """
    if recipe not in RECIPES:
        raise ValueError(f"--recipe must be one of {sorted(RECIPES)}, got {recipe!r}")
    docs = document_keys(keys, patents) if needs_graph(recipe) else None
    parts = []
    for pair_type, (anchor_view, positive_view, relation) in RECIPES[recipe].items():
        if relation == "same_patent":
            part = same_patent_pairs(keys, pair_type, anchor_view, positive_view)
        elif relation == "family_cross_language":
            part = family_pairs(keys, patents, pair_type, anchor_view)
        elif relation == "taxonomy":
            part = taxonomy_pairs(docs, patents, pair_type, taxonomy_cap, seed)
        else:
            part = citation_pairs(docs, patents, citations, pair_type, cutoff)
        parts.append(part.withColumn("signal", F.lit(SIGNAL[relation])))
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    return out.withColumn("recipe", F.lit(recipe))


def group_by_texts(pairs: DataFrame) -> DataFrame:
    """One pair per unordered pair of texts, whatever its pair types (the smallest pair type,
    then keys, wins: two patents citing each other that are also taxonomy neighbours give one
    CITATION pair, not the same two texts twice), with ``copies``: how many of ``pairs`` it
    stands for. One shuffle serves both drops and their counters: ``different_texts`` keeps
    the pairs whose two texts differ."""
    lo = F.least("anchor_hash", "positive_hash").alias("_lo")
    hi = F.greatest("anchor_hash", "positive_hash").alias("_hi")
    keep = F.min(F.struct(*[F.col(c) for c in PAIR_COLUMNS], "anchor_hash", "positive_hash"))
    grouped = pairs.groupBy(lo, hi).agg(keep.alias("k"), F.count("*").alias("copies"))
    return grouped.select("k.*", "copies")


def identical_texts() -> Column:
    """True for a pair of one text with itself (it teaches nothing)."""
    return F.col("anchor_hash") == F.col("positive_hash")


def different_texts(grouped: DataFrame) -> DataFrame:
    """The pairs of ``group_by_texts`` whose two texts differ."""
    return grouped.where(~identical_texts()).drop("copies")


_KEY = ("pair_type", "anchor_id", "anchor_lang", "positive_id", "positive_lang")


def cap_per_family(pairs: DataFrame, cap: int, seed: int) -> DataFrame:
    """At most ``cap`` pairs per family and pair type, chosen by a seeded hash."""
    order = Window.partitionBy("family_id", "pair_type").orderBy(uniform(seed, *_KEY), *_KEY)
    return pairs.withColumn("_r", F.row_number().over(order)).where(F.col("_r") <= cap).drop("_r")


def quotas(counts: dict[str, int], max_pairs: int) -> dict[str, int]:
    """Split ``max_pairs`` across pair types in proportion to their counts (largest remainder)."""
    total = sum(counts.values())
    if total <= max_pairs:
        return dict(counts)
    exact = {t: max_pairs * c / total for t, c in counts.items()}
    out = {t: int(v) for t, v in exact.items()}
    for t in sorted(exact, key=lambda t: (out[t] - exact[t], t))[: max_pairs - sum(out.values())]:
        out[t] += 1
    return out


def signal_quotas(counts: dict[str, int], signal_of: dict[str, str], n: int) -> dict[str, int]:
    """Split ``n`` pairs across signals in proportion to their counts, then each signal's
    share across its pair types: exact totals at both levels (largest remainder)."""
    by_signal: dict[str, dict[str, int]] = {}
    for pair_type, count in counts.items():
        by_signal.setdefault(signal_of[pair_type], {})[pair_type] = count
    shares = quotas({s: sum(c.values()) for s, c in by_signal.items()}, n)
    out: dict[str, int] = {}
    for signal, types in by_signal.items():
        out.update(quotas(types, shares[signal]))
    return out


def sample_pairs(
    pairs: DataFrame, quota: dict[str, int], counts: dict[str, int], seed: int
) -> DataFrame:
    """Exactly ``quota[t]`` pairs of each type, the ones with the smallest seeded hash.

    A first pass keeps a little more than the quota per type by hash threshold (no shuffle);
    the exact cut then ranks only those survivors.
    """
    # a draw of its own: by cap_per_family's numbers, a capped family's survivors (the
    # smallest of its many numbers) were nearly all sampled, its languages with them
    u = uniform(seed, *_KEY, draw="sample")
    # Keep quota + 6 standard deviations + 10: falling short is a ~1e-9 event.
    margin = {
        t: min(1.0, (quota[t] + 6 * quota[t] ** 0.5 + 10) / counts[t]) if counts[t] else 0.0
        for t in counts
    }
    threshold = F.create_map(*[x for t in sorted(margin) for x in (F.lit(t), F.lit(margin[t]))])
    kept = pairs.withColumn("_u", u).where(
        F.col("_u") < F.try_element_at(threshold, F.col("pair_type"))
    )
    limit = F.create_map(*[x for t in sorted(quota) for x in (F.lit(t), F.lit(quota[t]))])
    order = Window.partitionBy("pair_type").orderBy("_u", *_KEY)
    ranked = kept.withColumn("_r", F.row_number().over(order))
    return ranked.where(F.col("_r") <= F.try_element_at(limit, F.col("pair_type"))).drop("_u", "_r")


def stats(pairs: DataFrame) -> DataFrame:
    """gold/stage1_stats: pairs per recipe, type, signal and language pair."""
    return pairs.groupBy("recipe", "pair_type", "signal", "anchor_lang", "positive_lang").agg(
        F.count("*").alias("n_pairs")
    )
