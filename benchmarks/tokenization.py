"""Benchmark: the encoder's tokenization of patent-length texts, a prefix against the whole text.

The encoder keeps the first ``max_length`` tokens of every text (training batches, mining,
evaluation). It used to hand each text whole to the tokenizer; it now hands it a prefix that
gives the same tokens (``trainer.encoder.token_prefixes``). Real patents are longer than the
generated ones, so the texts here are generated texts of one language joined to the lengths
docs/SCALING.md assumes for real documents (ABS ~1,000, CLAIM ~8,000, DESC ~40,000
characters). Both ways run in one process on the same texts; their token ids must be equal.
Writes benchmarks/results/tokenization.json with texts/s and the ratio per model and view.

    python benchmarks/tokenization.py --texts 300
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))
from _common import best_of, machine, write_result

# characters per text by view, as docs/SCALING.md assumes for real patents
VIEW_CHARS = {"ABS": 1_000, "CLAIM": 8_000, "DESC": 40_000}
FIELDS = {"ABS": "abstract_localized", "CLAIM": "claims_localized", "DESC": "description_localized"}
# each model at the token limit it runs with: me5-small's positions, the paper's Qwen3 limit
MODELS = {"builtin:me5-small": 512, "builtin:qwen3-tiny": 4096}


def patent_texts(n: int, seed: int) -> dict[str, list[str]]:
    """``n`` texts per view: texts of one language from consecutive generated patents, joined
    by blank lines up to the view's length (the languages alternate over the patents)."""
    from spark_jobs.lib.sample import plan as sample_plan
    from spark_jobs.lib.sample.records import publication_record

    plan = sample_plan.build_plan(seed, max(2_000, 60 * n))
    by_lang: dict[str, dict[str, list[str]]] = {}
    for family in range(plan.n_families):
        for member in sample_plan.members(plan, family):
            record = publication_record(plan, member)
            for view, field in FIELDS.items():
                text = record[field][0]["text"]
                by_lang.setdefault(member.lang, {}).setdefault(view, []).append(text)
    langs = sorted(by_lang)
    out: dict[str, list[str]] = {}
    for view, chars in VIEW_CHARS.items():
        texts, cursor = [], dict.fromkeys(langs, 0)
        for i in range(n):
            lang = langs[i % len(langs)]
            pool, parts, size = by_lang[lang][view], [], 0
            while size < chars:
                part = pool[cursor[lang] % len(pool)]
                cursor[lang] += 1
                parts.append(part)
                size += len(part) + 2
            texts.append("\n\n".join(parts)[:chars])
        out[view] = texts
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--texts", type=int, default=300, help="texts per view")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats (the fastest)")
    parser.add_argument("--out", default=None, help="result file (default: benchmarks/results)")
    args = parser.parse_args(argv)

    from transformers import AutoTokenizer

    from trainer.encoder import token_prefixes
    from trainer.models import resolve

    texts = patent_texts(args.texts, args.seed)
    results = {}
    for model, limit in MODELS.items():
        tokenizer = AutoTokenizer.from_pretrained(resolve(model))
        per_view = {}
        for view, batch in texts.items():

            def whole(batch=batch, tokenizer=tokenizer, limit=limit):
                return tokenizer(batch, truncation=True, max_length=limit)["input_ids"]

            def prefix(batch=batch, tokenizer=tokenizer, limit=limit):
                cut = token_prefixes(tokenizer, batch, limit)
                return tokenizer(cut, truncation=True, max_length=limit)["input_ids"]

            if whole() != prefix():
                raise SystemExit(f"{model} {view}: a prefix gave other tokens than the text")
            baseline, ours = best_of(args.repeats, whole), best_of(args.repeats, prefix)
            per_view[view] = {
                "chars_per_text": VIEW_CHARS[view],
                "texts_per_second_whole": round(len(batch) / baseline, 1),
                "texts_per_second_prefix": round(len(batch) / ours, 1),
                "speedup": round(baseline / ours, 2),
            }
            print(f"{model} {view}: {baseline / ours:.2f}x ({baseline:.2f}s -> {ours:.2f}s)")
        results[model] = {"max_length": limit, "views": per_view}
    write_result(
        "tokenization",
        {
            "machine": machine(),
            "texts_per_view": args.texts,
            "seed": args.seed,
            "same_tokens": True,
            "models": results,
        },
        args.out,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
