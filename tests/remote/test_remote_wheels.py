"""Bootstrap's wheels: made once here and cached, chosen by the remote's platform, sent only when missing."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from fray.remote import bootstrap, connection, wheels
from tests.remote_support import remote_host, sshd  # noqa: F401


def test_compatibility_needs_the_same_interpreter_and_platform_and_a_libc_as_new():
    here = "cpython-311 linux-x86_64 glibc 2.36"
    assert wheels.compatible(here, here)
    assert wheels.compatible(here, "cpython-311 linux-x86_64 glibc 2.39")
    assert not wheels.compatible(here, "cpython-311 linux-x86_64 glibc 2.28")  # older glibc: manylinux may not load
    assert not wheels.compatible(here, "cpython-310 linux-x86_64 glibc 2.36")
    assert not wheels.compatible(here, "cpython-311 linux-aarch64 glibc 2.36")
    assert not wheels.compatible(here, "")  # a probe that could not say: never guess
    assert wheels.compatible(wheels.platform_key(), wheels.platform_key())


def test_the_plan_sends_this_machines_wheels_only_where_they_run():
    made = wheels.Wheels(Path("fray-1-py3-none-any.whl"),
                         (Path("click-8-py3-none-any.whl"), Path("orjson-3-cp311-cp311-manylinux_2_17_x86_64.whl")),
                         Path("pip-23-py3-none-any.whl"))
    same = bootstrap.plan(made, same_platform=True, wheelhouse=[])
    assert same.send == (made.fray, *made.dependencies, made.pip) and same.offline and same.pip_wheel == made.pip
    other = bootstrap.plan(made, same_platform=False, wheelhouse=[])
    assert other.send == (made.fray, Path("click-8-py3-none-any.whl")) and not other.offline and other.pip_wheel is None
    house = [Path("/w/orjson-3-cp39-cp39-macosx_11_0_arm64.whl")]
    named = bootstrap.plan(made, same_platform=True, wheelhouse=house)
    assert named.send == (made.fray, *house) and named.offline and named.pip_wheel is None


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, wheels.Wheels]:
    """An empty wheel cache, filled once for this module by `wheels.prepare` (it builds fray's wheel and repacks
    every dependency: the longest step of a first bootstrap), and what that first call made. The tests below
    only read the wheels in it."""
    cache = tmp_path_factory.mktemp("wheels") / "cache"
    return cache, wheels.prepare(cache)


def test_fray_and_its_dependencies_are_made_once_and_cached(made):
    cache, first = made
    names = {w.name.split("-")[0].lower() for w in first.dependencies}
    assert {"click", "orjson", "paramiko", "textual", "cryptography"} <= names  # direct and indirect
    assert first.pip is not None and first.pip.name.startswith("pip-")
    with zipfile.ZipFile(first.fray) as wheel:
        assert "fray/remote/wheels.py" in wheel.namelist()
    stamps = {p: p.stat().st_mtime_ns for p in (first.fray, *first.dependencies)}
    again = wheels.prepare(cache)
    assert again == first and {p: p.stat().st_mtime_ns for p in stamps} == stamps  # nothing rebuilt


@pytest.mark.slow
def test_wheels_already_on_the_remote_are_not_sent_again(remote_host, tmp_path, made):
    prepared = made[1]
    conn = connection.connect(remote_host.alias)
    home = tmp_path / "remote home"
    wanted = (prepared.fray, *prepared.dependencies[:3])
    assert bootstrap.send_missing(conn, "python3", str(home), str(home / "wheels"), wanted) == wanted
    assert bootstrap.send_missing(conn, "python3", str(home), str(home / "wheels"), wanted) == ()
    (home / "wheels" / prepared.fray.name).write_bytes(b"a different build")  # same name, other content
    assert bootstrap.send_missing(conn, "python3", str(home), str(home / "wheels"), wanted) == (prepared.fray,)
    assert (home / "wheels" / prepared.fray.name).read_bytes() == prepared.fray.read_bytes()


def test_an_edited_source_tree_gets_a_new_wheel(tmp_path):
    (tmp_path / "shepherd").mkdir()
    (tmp_path / "pyproject.toml").write_text("[project]\n")
    (tmp_path / "shepherd" / "a.py").write_text("A = 1\n")
    before = wheels._source_hash(tmp_path)
    (tmp_path / "shepherd" / "__pycache__").mkdir()
    (tmp_path / "shepherd" / "__pycache__" / "a.pyc").write_bytes(b"noise")
    assert wheels._source_hash(tmp_path) == before  # byte-code is not source
    (tmp_path / "shepherd" / "a.py").write_text("A = 2\n")
    assert wheels._source_hash(tmp_path) != before
