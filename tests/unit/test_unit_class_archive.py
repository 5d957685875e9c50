"""The driver's class archive (`flowspark.engine.class_archive`): which file, which flags.
Building one starts a JVM: tests/spark/test_class_archive.py."""

from __future__ import annotations

import os
import time
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


def test_a_jar_with_another_time_means_another_archive(
    java_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The JVM maps nothing of an archive when a jar's size or time differs from when
    # it was built (a reinstall at the same path), so the name must change with them.
    import pyspark  # noqa: PLC0415 only its __file__, patched below

    jars = tmp_path / "pyspark" / "jars"
    jars.mkdir(parents=True)
    jar = jars / "spark-core.jar"
    jar.write_bytes(b"jar")
    os.utime(jar, (1_700_000_000, 1_700_000_000))
    monkeypatch.setattr(pyspark, "__file__", str(tmp_path / "pyspark" / "__init__.py"))
    flags = ("-XX:TieredStopAtLevel=1",)
    before = archive_path(str(java_home), flags)
    assert archive_path(str(java_home), flags) == before
    os.utime(jar, (1_700_000_100, 1_700_000_100))  # reinstalled: same name, same size
    assert archive_path(str(java_home), flags) != before


def test_building_an_archive_prunes_the_ones_built_long_ago(tmp_path: Path) -> None:
    folder = tmp_path / "class-archives"
    folder.mkdir()
    kept, recent, old, old_partial = (
        folder / name
        for name in ("driver-a.jsa", "driver-b.jsa", "driver-c.jsa", "driver-d.123.partial")
    )
    for path in (kept, recent, old, old_partial):
        path.write_bytes(b"x")
    long_ago = time.time() - (class_archive.KEEP_DAYS + 1) * 86400
    for path in (kept, old, old_partial):
        os.utime(path, (long_ago, long_ago))
    other = folder / "notes.txt"  # not an archive: left alone whatever its age
    other.write_text("x")
    os.utime(other, (long_ago, long_ago))

    removed = class_archive.prune(kept)

    assert sorted(removed) == sorted([old, old_partial])
    assert kept.exists() and recent.exists() and other.exists()
