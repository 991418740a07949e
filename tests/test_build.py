"""setup.py's choice of cuda.h: a header older than cuda-bindings must be refused with a message
that says why and what to install, not left to fail as a g++ error in generated code."""
import importlib.util
import os

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
