"""The tools CI's jobs use to get an interpreter the machine lacks: how
tools/freethreaded_python.py reads a distribution's source index and picks a tarball. (The
build itself runs in `.ci/free-threaded`, which prints the interpreter it ran on.) And
tools/repeat_test.py, which runs a test many times, each in a fresh interpreter with a hash
seed of its own, and counts how the runs ended."""
import hashlib
import importlib.util
import lzma
import os
import urllib.error

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _tool(name):
    """tools/``name``.py as a module (its __name__ is not "__main__": its main does not run)."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "tools", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def ft():
    return _tool("freethreaded_python")


def _stanza(package, version, tar, sha256=None, sha512=None):
    lines = [f"Package: {package}", f"Version: {version}", "Format: 3.0 (quilt)", "Files:",
             f" 0123 99 {tar}"]
    if sha256:
        lines += ["Checksums-Sha256:", f" {sha256} 99 {package}_{version}.dsc",
                  f" {sha256} 99 {tar}"]
    if sha512:
        lines += ["Checksums-Sha512:", f" {sha512} 99 {tar}"]
    lines += [f"Directory: pool/main/p/{package}", "Priority: optional"]
    return "\n".join(lines)


def test_sources_reads_each_upload_with_its_strongest_listed_checksum(ft):
    text = "\n\n".join([
        _stanza("python3.14", "3.14.9-1", "python3.14_3.14.9.orig.tar.xz", sha256="aa" * 32),
        _stanza("python3.14", "3.14.10-1", "python3.14_3.14.10.orig.tar.xz", sha512="bb" * 64),
        _stanza("python3.13", "3.13.9-1", "python3.13_3.13.9.orig.tar.xz", sha256="cc" * 32),
        _stanza("python3.14", "3.14.8-1", "python3.14_3.14.8.orig.tar.xz"),   # no checksum
    ])
    got = ft._sources(text, "python3.14")
    assert got == [
        ("3.14.9-1", "pool/main/p/python3.14", "python3.14_3.14.9.orig.tar.xz", "sha256",
         "aa" * 32),
        ("3.14.10-1", "pool/main/p/python3.14", "python3.14_3.14.10.orig.tar.xz", "sha512",
         "bb" * 64),
    ]
    assert ft._version_key("3.14.10-1") > ft._version_key("3.14.9-1ubuntu0.2")


def test_tarball_takes_the_newest_upload_a_mirror_serves_and_checks_it(ft, tmp_path,
                                                                       monkeypatch, capsys):
    good = b"the 3.14.9 release tarball"
    index = "\n\n".join([
        _stanza("python3.14", "3.14.10-1", "python3.14_3.14.10.orig.tar.xz",
                sha256=hashlib.sha256(b"never served").hexdigest()),
        _stanza("python3.14", "3.14.9-1", "python3.14_3.14.9.orig.tar.xz",
                sha256=hashlib.sha256(good).hexdigest()),
    ]).encode()
    asked = []

    def fetch(url, timeout=120):
        asked.append(url.rsplit("/", 1)[1])
        if url.endswith("Sources.xz"):
            return lzma.compress(index)
        if "3.14.10" in url:
            raise urllib.error.HTTPError(url, 404, "Not Found", {}, None)
        return good

    monkeypatch.setattr(ft, "_fetch", fetch)
    monkeypatch.setattr(ft, "ARCHIVES", (("Here", "http://mirror", ("sid",)),))
    path = ft._tarball("3.14", str(tmp_path))
    assert asked == ["Sources.xz", "python3.14_3.14.10.orig.tar.xz",
                     "python3.14_3.14.9.orig.tar.xz"]
    with open(path, "rb") as f:
        assert f.read() == good

    # A tarball whose checksum is not the index's stops the build, naming both.
    index = index.replace(hashlib.sha256(good).hexdigest().encode(), b"0" * 64)
    with pytest.raises(SystemExit):
        ft._tarball("3.14", str(tmp_path))
    err = capsys.readouterr().err
    assert f"python3.14_3.14.9.orig.tar.xz has sha256 {hashlib.sha256(good).hexdigest()}" in err
    assert f"its index says {'0' * 64}" in err


def test_tarball_says_why_when_no_archive_serves_one(ft, tmp_path, monkeypatch, capsys):
    def fetch(url, timeout=120):
        raise urllib.error.URLError("unreachable")

    monkeypatch.setattr(ft, "_fetch", fetch)
    with pytest.raises(SystemExit) as exc:
        ft._tarball("3.14", str(tmp_path))
    assert exc.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith("freethreaded_python: no archive lists python3.14's source")
    assert "Debian sid's index: <urlopen error unreachable>" in err
    assert "Ubuntu devel's index" in err


def test_each_run_has_its_own_hash_seed_and_the_first_failure_is_shown(tmp_path, capsys):
    test_file = tmp_path / "test_seeded.py"
    test_file.write_text(
        "import os\n\n\n"
        "def test_passes_on_odd_seeds():\n"
        "    assert int(os.environ['PYTHONHASHSEED']) % 2 == 1, 'an even seed'\n")
    assert _tool("repeat_test").main([str(test_file), "-n", "4", "-j", "2"]) == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert "     2 ok     1 passed" in lines
    assert "     2 FAILED 1 failed" in lines
    assert "The first run that failed (PYTHONHASHSEED=2):" in out and "an even seed" in out


def test_pytest_arguments_after_the_dashes_reach_each_run(tmp_path, capsys):
    test_file = tmp_path / "test_two.py"
    test_file.write_text("def test_a():\n    pass\n\n\ndef test_b():\n    pass\n")
    assert _tool("repeat_test").main([str(test_file), "-n", "2", "--", "-k", "test_b"]) == 0
    assert capsys.readouterr().out.splitlines() == ["     2 ok     1 passed, 1 deselected"]
