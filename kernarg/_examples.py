"""Build the embedding examples (examples/c_extension, examples/cython_launcher) the way a
downstream project would, for the tests and the C-API benchmark."""
from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import tempfile

__all__ = ["build_example", "examples_dir"]


def examples_dir() -> str | None:
    """The repository's examples/ directory, if kernarg runs from a checkout."""
    for base in (os.getcwd(), os.path.dirname(os.path.dirname(os.path.abspath(__file__)))):
        path = os.path.join(base, "examples")
        if os.path.isdir(os.path.join(path, "c_extension")):
            return path
    return None


def build_example(name: str, module: str, workdir: str | None = None):
    """Copy examples/<name> to a fresh directory, build it in place, import ``module``."""
    src = examples_dir()
    if src is None:
        raise FileNotFoundError("examples/ not found: run from a kernarg checkout")
    dest = os.path.join(workdir or tempfile.mkdtemp(prefix="kernarg-example-"), name)
    shutil.copytree(os.path.join(src, name), dest, dirs_exist_ok=True)
    proc = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=dest,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"building examples/{name} failed:\n{proc.stdout}\n{proc.stderr}")
    sys.path.insert(0, dest)
    try:
        return importlib.import_module(module)
    finally:
        sys.path.remove(dest)
