"""The JDK lookups: Pyserini's (>= 21) and the one `make` runs Spark on (17, 21 or 25)."""

from pathlib import Path

from retrieval import java


def _jdk(root: Path, name: str, version: str) -> Path:
    home = root / name
    (home / "bin").mkdir(parents=True)
    (home / "release").write_text(f'JAVA_VERSION="{version}"\n')
    return home


def test_spark_runs_on_the_newest_supported_jdk_unless_java_home_says_otherwise(
    tmp_path, monkeypatch
):
    for var in ("JAVA_HOME", "XEMBED_JAVA_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(java, "_JVM_DIRS", (tmp_path,))
    _jdk(tmp_path, "openjdk-11", "11.0.2")
    _jdk(tmp_path, "openjdk-17", "17.0.12")
    newest = _jdk(tmp_path, "zulu-25", "25.0.1")  # listed after the others
    _jdk(tmp_path, "openjdk-26", "26-ea")  # newer than Spark supports
    assert java.spark_java_home() == newest
    assert java.find_java_home() == tmp_path / "openjdk-26"  # Pyserini's: the first >= 21
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "openjdk-17"))
    assert java.spark_java_home() == tmp_path / "openjdk-17"  # the user's choice wins
    monkeypatch.delenv("JAVA_HOME")
    (newest / "release").unlink()  # no release file and no java binary: version unknown
    assert java.spark_java_home() == tmp_path / "openjdk-17"
