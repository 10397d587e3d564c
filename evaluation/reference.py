"""ranx, the reference implementation the metrics and the fusion are checked against
(tests/test_metrics.py, tests/test_tasks.py, benchmarks/eval_metrics.py).

ranx compiles its numba kernels on first use, one per argument type, into its on-disk cache
beside its sources in the venv. Left to the test suite, each test worker compiled them on
its own (~130 s of the suite's CPU on a fresh venv); ``make setup`` compiles them once, in
one process (~85 s on 2 cores), and later runs load them from the cache:

    python -m evaluation.reference
"""

from __future__ import annotations

import sys
import time

#: the ranx metrics the tests and benchmarks/eval_metrics.py ask for
METRICS = ("hit_rate@1", "recall@1", "mrr", "ndcg@10")


def warm() -> float:
    """Compile (or load from ranx's cache) the ranx kernels this project calls, on data of the
    types the callers pass (numba compiles one kernel per argument type); seconds taken."""
    import random
    import warnings

    import numpy as np
    from ranx import Qrels, Run, evaluate, fuse

    started = time.perf_counter()
    rng = random.Random(0)
    docs = [f"d{i:03d}" for i in range(60)]

    def run() -> Run:
        queries = {f"q{q}": rng.sample(docs, rng.randint(5, 50)) for q in range(40)}
        return Run(
            {q: {d: float(len(ds) - i) for i, d in enumerate(ds)} for q, ds in queries.items()}
        )

    # the shape of tests/test_tasks.py's RRF case (5 queries, 40 results each, NumPy-drawn
    # scores): fusing it compiled kernels that fusing `run()`s did not (ranx's cache listed
    # before and after), so it is warmed as it is
    def permuted() -> Run:
        order = np.random.default_rng(rng.randrange(1 << 30)).permutation(40)
        return Run({f"q{q}": {f"d{d}": float(s) for d, s in enumerate(order)} for q in range(5)})

    qrels = Qrels({f"q{q}": {d: 1 for d in rng.sample(docs, rng.randint(1, 6))} for q in range(40)})
    scored = run()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba's type-safety notes while compiling
        for metrics in (list(METRICS), *METRICS):  # one call for all, and one per metric
            evaluate(qrels, scored, metrics, return_mean=False)
            evaluate(qrels, scored, metrics)
        fuse([permuted() for _ in range(3)], method="rrf", params={"k": 60}).to_dict()
    return time.perf_counter() - started


def main() -> int:
    seconds = warm()
    print(f"ranx kernels ready ({seconds:.1f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
