"""Fetch the delta-spark jars from Maven Central once and put them on pyspark's classpath.

The artifact version is read from the installed ``delta-spark`` Python package and the
Scala/Spark suffix from the installed pyspark, so Python and JVM sides always match.
Jars are cached under ``$XEMBED_JAR_CACHE`` (default ``~/.cache/xembed/jars``) and
verified against Maven's SHA-1 files; later runs need no network. They are copied into
``pyspark/jars`` so ``python``, ``pytest`` and ``spark-submit`` all see them without flags.

    python -m lake.jars install
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import os
import shutil
import sys
import urllib.request
from pathlib import Path

MAVEN_REPO = os.environ.get("XEMBED_MAVEN_REPO", "https://repo1.maven.org/maven2")
SCALA_VERSION = "2.13"


def delta_artifacts() -> list[tuple[str, str, str]]:
    """(group, artifact, version) of the jars Delta needs beyond Spark's own."""
    import pyspark

    delta_version = importlib.metadata.version("delta-spark")
    spark_minor = ".".join(pyspark.__version__.split(".")[:2])
    return [
        ("io.delta", f"delta-spark_{spark_minor}_{SCALA_VERSION}", delta_version),
        ("io.delta", "delta-storage", delta_version),
    ]


def maven_coordinates() -> str:
    """The ``--packages`` value for spark-submit on a cluster."""
    group, artifact, version = delta_artifacts()[0]
    return f"{group}:{artifact}:{version}"


def cache_dir() -> Path:
    return Path(os.environ.get("XEMBED_JAR_CACHE", Path.home() / ".cache" / "xembed" / "jars"))


def pyspark_jars_dir() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def _download(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=120) as response:
        return response.read()


def fetch(group: str, artifact: str, version: str, into: Path) -> Path:
    """Download one jar into the cache unless a verified copy is already there."""
    name = f"{artifact}-{version}.jar"
    target = into / name
    if target.exists():
        return target
    into.mkdir(parents=True, exist_ok=True)
    base = f"{MAVEN_REPO}/{group.replace('.', '/')}/{artifact}/{version}/{name}"
    print(f"fetching {base}", file=sys.stderr)
    payload = _download(base)
    expected = _download(base + ".sha1").decode().split()[0].strip()
    actual = hashlib.sha1(payload).hexdigest()
    if actual != expected:
        raise RuntimeError(f"{name}: SHA-1 {actual} does not match Maven's {expected}")
    partial = target.with_suffix(".part")
    partial.write_bytes(payload)
    partial.replace(target)
    return target


def install() -> list[Path]:
    """Fetch (once) and copy the Delta jars into pyspark/jars; returns the installed paths."""
    installed = []
    dest_dir = pyspark_jars_dir()
    for group, artifact, version in delta_artifacts():
        cached = fetch(group, artifact, version, cache_dir())
        dest = dest_dir / cached.name
        if not dest.exists() or dest.stat().st_size != cached.stat().st_size:
            shutil.copyfile(cached, dest)
        installed.append(dest)
    return installed


def installed_jars() -> list[Path]:
    """Delta jars present on pyspark's classpath (empty when ``install`` has not run)."""
    paths = [pyspark_jars_dir() / f"{a}-{v}.jar" for _, a, v in delta_artifacts()]
    return [p for p in paths if p.exists()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("command", choices=["install", "coordinates"])
    args = parser.parse_args(argv)
    if args.command == "coordinates":
        print(maven_coordinates())
        return 0
    for path in install():
        print(f"delta jar ready: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
