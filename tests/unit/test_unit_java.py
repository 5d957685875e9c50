"""`java_major_version`: parse ``java -version`` output of fake java executables."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from flowspark.engine.java import java_major_version


def fake_java(tmp_path: Path, stderr_text: str, exit_code: int = 0) -> str:
    path = tmp_path / "java"
    path.write_text(f"#!/bin/sh\ncat >&2 <<'EOF'\n{stderr_text}\nEOF\nexit {exit_code}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.mark.parametrize(
    ("banner", "major"),
    [
        ('openjdk version "21.0.8" 2025-07-15 LTS', 21),
        ('openjdk version "17.0.2" 2022-01-18', 17),
        ('openjdk version "17" 2021-09-14', 17),
        ('java version "1.8.0_292"', 8),
        ('openjdk version "22-ea" 2024-03-19', 22),
    ],
)
def test_major_version_is_parsed_from_the_banner(tmp_path, banner, major):
    assert java_major_version(fake_java(tmp_path, banner)) == major


def test_banner_without_a_version_is_none(tmp_path):
    assert java_major_version(fake_java(tmp_path, "Error: could not create the VM", 1)) is None


def test_missing_executable_is_none(tmp_path):
    assert java_major_version(str(tmp_path / "no-java")) is None


def test_non_executable_file_is_none(tmp_path):
    path = tmp_path / "java"
    path.write_text("not a program")
    assert java_major_version(str(path)) is None
