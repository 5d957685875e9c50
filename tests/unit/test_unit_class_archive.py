"""The driver's class archive (`flowspark.engine.class_archive`): which file, which flags.
Building one starts a JVM: tests/spark/test_class_archive.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowspark.engine import class_archive
from flowspark.engine.class_archive import ARCHIVE_ENV, archive_path, build, driver_flags


@pytest.fixture
def java_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A Java home with a ``bin/java`` and a ``release`` file; the cache in tmp_path."""
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "java").write_text("#!/bin/sh\n")
    (home / "release").write_text('JAVA_VERSION="17.0.15"\n')
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(ARCHIVE_ENV, raising=False)
    return home


def test_one_archive_per_java_and_flags(java_home: Path) -> None:
    flags = ("-XX:TieredStopAtLevel=1",)
    path = archive_path(str(java_home), flags)
    assert path == archive_path(str(java_home), flags)  # stable
    assert path.parent == java_home.parent / "cache" / "flowspark" / "class-archives"
    assert path.name.startswith("driver-") and path.suffix == ".jsa"
    assert archive_path(str(java_home), (*flags, "-Xmx8g")) != path
    (java_home / "release").write_text('JAVA_VERSION="17.0.16"\n')  # an upgraded Java
    assert archive_path(str(java_home), flags) != path


def test_the_driver_maps_the_archive_only_once_it_is_built(java_home: Path) -> None:
    flags = ("-XX:TieredStopAtLevel=1",)
    assert driver_flags(str(java_home), flags) == []
    path = archive_path(str(java_home), flags)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"archive")
    mapped = driver_flags(str(java_home), flags)
    assert mapped[0] == f"-XX:SharedArchiveFile={path}"
    assert "-Xshare:auto" in mapped and "-Xlog:cds=off" in mapped  # never a hard failure


@pytest.mark.parametrize("off", ["0", "false", "no"])
def test_archives_can_be_turned_off(
    java_home: Path, monkeypatch: pytest.MonkeyPatch, off: str
) -> None:
    flags = ("-XX:TieredStopAtLevel=1",)
    path = archive_path(str(java_home), flags)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"archive")
    monkeypatch.setenv(ARCHIVE_ENV, off)
    assert driver_flags(str(java_home), flags) == []
    assert build() is None


def test_an_existing_archive_is_not_built_again(
    java_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(class_archive, "find_java_home", lambda: str(java_home))
    path = archive_path(str(java_home), class_archive.JVM_FLAGS)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"archive")

    def no_child(*args: object, **kwargs: object) -> None:
        raise AssertionError("no JVM should start")

    monkeypatch.setattr(class_archive.subprocess, "run", no_child)
    assert build() == path


def test_the_classpath_s_folder_is_part_of_the_key() -> None:
    # Another virtualenv's copy of the same jars is another classpath: the JVM would
    # refuse this archive there, so it gets its own.
    import pyspark

    jars = Path(pyspark.__file__).resolve().parent / "jars"
    assert f"|{jars}|" in class_archive._pyspark_fingerprint()
