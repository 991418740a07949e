"""setup.py's choice of cuda.h: a header older than cuda-bindings must be refused with a message
that says why and what to install, not left to fail as a g++ error in generated code. And the
source distribution: the sources and the tests, never C generated against one cuda-bindings."""
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tarfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def build():
    spec = importlib.util.spec_from_file_location("kernarg_setup", os.path.join(ROOT, "setup.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)     # __name__ is not "__main__": nothing is built
    return module


PXD = """\
cdef extern from 'cuda.h':
    ctypedef struct CUnew_st 'CUnew_st':
        int x
    cdef struct CUold_st:
        int y
    ctypedef CUold_st CUold_v1
    cdef struct CUalias_st "CUreal_st":
        int w

cdef extern from "":
    cdef struct CUlocal_st:
        pass

ctypedef CUnew_st CUnew_v1
ctypedef CUalias_st CUalias_v1
ctypedef CUlocal_st* CUlocal
ctypedef unsigned int GLuint

cdef struct CUown_st:
    int z

ctypedef CUown_st CUown_v1
"""


def test_header_types_are_the_cuda_h_types_named_outside_the_extern_blocks(build):
    # CUold_st is typedef'd inside its extern block (cuda.h's own typedef); CUlocal_st comes
    # from an extern "" block and CUown_st from the .pxd itself: none needs cuda.h. A struct
    # with a C name of its own is looked for under that name.
    assert build.header_types(PXD) == ["CUnew_st", "CUreal_st"]


def test_missing_types_reads_the_header(build, tmp_path):
    (tmp_path / "cuda.h").write_text("#define CUDA_VERSION 13000\ntypedef struct CUold_st {} X;\n")
    assert build.missing_types(str(tmp_path), ["CUold_st", "CUnew_st"]) == ["CUnew_st"]
    assert build._cuda_version(str(tmp_path)) == (13, 0)


def test_the_installed_bindings_name_their_header_types(build):
    # The real cydriver.pxd: the parse finds the extern blocks (a format change would make it
    # find nothing, and the check silently pass), and the cuda.h this build used declares them.
    _, pxd = build._cydriver_pxd()
    assert "cdef extern from" in pxd
    types = build.header_types(pxd)
    dirs = build.cuda_include()
    with_cuda_h = [d for d in dirs if os.path.exists(os.path.join(d, "cuda.h"))]
    assert with_cuda_h
    assert build.missing_types(with_cuda_h[0], types) == []
    assert all(t.isidentifier() for t in types)


def test_an_older_header_is_refused_with_the_fix(build, tmp_path, monkeypatch):
    major = build._bindings_major()
    include = tmp_path / "include"
    include.mkdir()
    (include / "cuda.h").write_text(f"#define CUDA_VERSION {major * 1000}\n")
    monkeypatch.setattr(build, "_cydriver_pxd", lambda: ("cydriver.pxd", PXD))
    monkeypatch.setattr(os.path, "exists", _only_under(str(tmp_path)))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    with pytest.raises(RuntimeError, match=r"CUnew_st, CUreal_st missing from .*include \(CUDA "
                                           rf"{major}\.0\).*nvidia-cuda-runtime>="):
        build.cuda_include()


def _only_under(root):
    real = os.path.exists

    def exists(path):
        # Hide every other cuda.h (the wheels', a toolkit's) from cuda_include.
        return real(path) and (not str(path).endswith("cuda.h") or str(path).startswith(root))
    return exists


# What a build writes beside the sources: Cython's C for kernarg's own modules, the driver shim
# setup.py generates, and the files any build leaves.
GENERATED = re.compile(r"kernarg/(_\w+\.(c|cpp|html)|_driver_compat\.pxi)$")


SHIPPED_DIRS = {"kernarg", "tests", "examples", "benchmarks", "tools", "docs"}
SHIPPED_FILES = {"README.md", "LICENSE", "pyproject.toml", "setup.py", "MANIFEST.in"}


def _shipped(rel):
    parts = rel.split("/")
    return not (GENERATED.match(rel) or rel.endswith((".so", ".o", ".pyd", ".pyc"))
                or any(p.startswith(".") or p in ("__pycache__", "build", "dist")
                       or p.endswith(".egg-info") for p in parts))


def test_the_sdist_holds_the_sources_and_tests_and_no_generated_c(tmp_path):
    # The C Cython generates names the types of the cydriver.pxd it was generated against. In
    # an sdist it would be reused by a build whose cuda-bindings' files are older than it (pip
    # install --no-build-isolation in an existing environment, as CUDA 12 builds are made),
    # and fail to compile against another release's cuda.h (seen: an sdist made with 13.5
    # built with 12.8, "CUDA_FABRIC_COPY_BATCH_OP_st does not name a type").
    tree = tmp_path / "tree"
    shutil.copytree(ROOT, tree, ignore=shutil.ignore_patterns(
        ".*", "build", "dist", "*.egg-info", "__pycache__"))
    # The tree the suite runs in was built in place: its generated C is there to be left out.
    assert (tree / "kernarg" / "_handler.c").exists()
    proc = subprocess.run([sys.executable, "setup.py", "-q", "sdist", "-d", str(tmp_path / "out")],
                          cwd=tree, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (sdist,) = (tmp_path / "out").glob("kernarg-*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = {m.name.split("/", 1)[1] for m in tar.getmembers() if m.isfile()}
    assert [n for n in names if not _shipped(n) and not n.startswith("kernarg.egg-info/")] == []
    present = {os.path.relpath(os.path.join(d, f), tree).replace(os.sep, "/")
               for d, _, files in os.walk(tree) for f in files}
    # What the sdist is to hold: the project's files and directories (a log left at the top
    # of a working tree is not the project's).
    expected = {rel for rel in present if _shipped(rel) and (
        rel.split("/", 1)[0] in SHIPPED_DIRS if "/" in rel else rel in SHIPPED_FILES)}
    # The package's sources, the tests and what they build and read (examples/, README.md).
    assert {"kernarg/_handler.pyx", "kernarg/include/kernarg.h", "tests/conftest.py",
            "examples/c_extension/setup.py", "README.md", "MANIFEST.in"} <= expected
    assert sorted(expected - names) == []
