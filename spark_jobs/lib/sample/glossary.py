"""The built-in trilingual technical glossary (glossary_*.tsv next to this file)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib.resources import files

LANGS = ("en", "zh", "ja")


@dataclass(frozen=True)
class Term:
    kind: str
    key: str  # IPC subclass for fields and devices, unit for parameters
    en: str
    zh: str
    ja: str

    def __call__(self, lang: str) -> str:
        return getattr(self, lang)


@dataclass(frozen=True)
class Glossary:
    fields: tuple[Term, ...]
    devices: tuple[Term, ...]
    components: tuple[Term, ...]
    materials: tuple[Term, ...]
    relations: tuple[Term, ...]
    functions: tuple[Term, ...]
    steps: tuple[Term, ...]
    parameters: tuple[Term, ...]

    def devices_of_field(self, field: Term) -> tuple[Term, ...]:
        return tuple(d for d in self.devices if d.key == field.key)

    def __len__(self) -> int:
        return sum(len(getattr(self, f)) for f in self.__dataclass_fields__)


_KIND_TO_FIELD = {
    "field": "fields",
    "device": "devices",
    "component": "components",
    "material": "materials",
    "relation": "relations",
    "function": "functions",
    "step": "steps",
    "parameter": "parameters",
}


@cache
def load_glossary() -> Glossary:
    """Parse every glossary_*.tsv (kind, key, en, zh, ja); '#' lines are comments."""
    buckets: dict[str, list[Term]] = {name: [] for name in _KIND_TO_FIELD.values()}
    # importlib.resources also reads from the zip shipped to executors with --py-files.
    package = files("spark_jobs.lib.sample")
    paths = sorted(
        (p for p in package.iterdir() if p.name.startswith("glossary_")), key=lambda p: p.name
    )
    for path in paths:
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip() or line.startswith("#"):
                continue
            parts = line.split("\t")
            if len(parts) != 5 or parts[0] not in _KIND_TO_FIELD:
                raise ValueError(
                    f"{path.name}:{lineno}: expected kind, key, en, zh, ja; got {line!r}"
                )
            buckets[_KIND_TO_FIELD[parts[0]]].append(Term(*parts))
    return Glossary(**{name: tuple(terms) for name, terms in buckets.items()})
