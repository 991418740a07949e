"""Build a free-threaded CPython (``--disable-gil``) into a folder, from a distribution's source.

    python3 tools/freethreaded_python.py 3.14 DEST      # prints DEST/bin/python3.14t

CI's free-threaded job (`.ci/free-threaded`) uses it when the machine has no `python3.14t`:
neither Debian nor Ubuntu packages a free-threaded interpreter, python.org is not reachable
from the development and CI machines, and Debian's servers refuse its source tarballs. Ubuntu's
archive serves some of them, so the tarball CPython's release team published (a distribution's
`python3.X_*.orig.tar.xz` is it, unpatched) is taken from there: the source indexes of Debian
unstable and Ubuntu's development release and LTS are read, every upload they name is tried
newest first until one downloads (on 2026-12-02 Ubuntu's mirror served 3.14.4 and refused
3.14.10), and its SHA-256 (or SHA-512) is checked against the index. It is then configured
with ``--disable-gil`` and built with every core (3 minutes on two). Nothing is
installed outside DEST. ``KERNARG_DEBIAN_MIRROR`` and ``KERNARG_UBUNTU_MIRROR`` replace the
archives' URLs.

Exits with status 1 and one line on stderr saying why when it cannot (no archive serves a
tarball, a checksum that does not match, a failed build, whose log's last lines it prints):
the caller decides what to do then.
"""
import hashlib
import lzma
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import urllib.error
import urllib.request

# (name, mirror, suites): the suites whose source indexes are read. Ubuntu's LTS (26.04,
# "resolute") is listed besides its development release because a mirror may not hold every
# file its index names; every upload found is tried, newest first.
ARCHIVES = (
    ("Debian", os.environ.get("KERNARG_DEBIAN_MIRROR", "http://deb.debian.org/debian"),
     ("sid",)),
    ("Ubuntu", os.environ.get("KERNARG_UBUNTU_MIRROR", "http://archive.ubuntu.com/ubuntu"),
     ("devel", "resolute-updates", "resolute")),
)


def _fail(msg):
    print(f"freethreaded_python: {msg}", file=sys.stderr)
    sys.exit(1)


def _fetch(url, timeout=120):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read()


def _version_key(version):
    return tuple(int(p) for p in re.findall(r"\d+", version))


def _sources(text, package):
    """[(version, directory, tarball name, hash algorithm, hex digest)] for each upload of
    package in a Sources index."""
    out = []
    for stanza in text.split("\n\n"):
        if not re.search(rf"^Package: {re.escape(package)}$", stanza, re.M):
            continue
        version = re.search(r"^Version: (\S+)$", stanza, re.M)
        directory = re.search(r"^Directory: (\S+)$", stanza, re.M)
        if not (version and directory):
            continue
        for algo, field in (("sha256", "Checksums-Sha256"), ("sha512", "Checksums-Sha512")):
            block = re.search(rf"^{field}:\n((?: .*\n?)+)", stanza, re.M)
            tar = block and re.search(r"^ ([0-9a-f]+) \d+ (\S+\.orig\.tar\.(?:xz|gz))$",
                                      block.group(1), re.M)
            if tar:
                out.append((version.group(1), directory.group(1), tar.group(2), algo,
                            tar.group(1)))
                break
    return out


def _tarball(ver, tmp):
    """Download python{ver}'s newest source tarball that an archive serves; returns its path."""
    why, found = [], {}
    for name, mirror, suites in ARCHIVES:
        for suite in suites:
            try:
                text = lzma.decompress(_fetch(f"{mirror}/dists/{suite}/main/source/Sources.xz"))
            except (OSError, lzma.LZMAError) as exc:     # urllib's errors are OSErrors
                why.append(f"{name} {suite}'s index: {exc}")
                continue
            for version, directory, tar, algo, digest in _sources(
                    text.decode("utf-8", "replace"), f"python{ver}"):
                found.setdefault((_version_key(version), name), (
                    f"{name} {suite}", f"{mirror}/{directory}/{tar}", tar, algo, digest))
    if not found:
        _fail(f"no archive lists python{ver}'s source: " + "; ".join(why))
    for key in sorted(found, reverse=True):
        where, url, tar, algo, digest = found[key]
        try:
            data = _fetch(url, timeout=300)
        except OSError as exc:
            why.append(f"{where}'s {tar}: {exc}")
            continue
        got = hashlib.new(algo, data).hexdigest()
        if got != digest:
            _fail(f"{url} has {algo} {got}, its index says {digest}")
        path = os.path.join(tmp, tar)
        with open(path, "wb") as f:
            f.write(data)
        print(f"freethreaded_python: {tar} from {where}", file=sys.stderr)
        return path
    _fail("no archive serves a source tarball: " + "; ".join(why))


def _run(cmd, cwd, log):
    with open(log, "ab") as f:
        if subprocess.run(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT).returncode != 0:
            with open(log, "rb") as g:
                tail = g.read()[-1500:].decode("utf-8", "replace")
            _fail(f"{' '.join(cmd)} failed; the end of {log}:\n{tail}")


def main():
    if len(sys.argv) != 3 or not re.fullmatch(r"3\.(1[3-9]|[2-9]\d)", sys.argv[1]):
        _fail("usage: freethreaded_python.py 3.N DEST (N >= 13: earlier CPythons have no "
              "free-threaded build)")
    ver, dest = sys.argv[1], os.path.abspath(sys.argv[2])
    exe = os.path.join(dest, "bin", f"python{ver}t")
    os.makedirs(dest, exist_ok=True)
    log = os.path.join(dest, "build.log")
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(_tarball(ver, tmp)) as tf:
            tf.extractall(tmp, filter="data")
        src = next((os.path.join(tmp, d) for d in os.listdir(tmp)
                    if os.path.isfile(os.path.join(tmp, d, "configure"))), None)
        if src is None:
            _fail("the tarball holds no folder with a configure script")
        _run(["./configure", f"--prefix={dest}", "--disable-gil", "--with-ensurepip=install"],
             src, log)
        _run(["make", f"-j{os.cpu_count() or 1}"], src, log)
        _run(["make", "install"], src, log)
    check = subprocess.run([exe, "-c", "import sys, sysconfig, ssl, ctypes, venv, ensurepip; "
                            "print(sysconfig.get_config_var('Py_GIL_DISABLED'), "
                            "sys._is_gil_enabled())"], capture_output=True, text=True)
    if check.returncode != 0 or check.stdout.split() != ["1", "False"]:
        _fail(f"the built {exe} is not a working free-threaded interpreter: "
              f"{(check.stderr or check.stdout).strip()[-300:]}")
    print(exe)


if __name__ == "__main__":
    main()
