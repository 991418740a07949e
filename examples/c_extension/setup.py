"""Build: python setup.py build_ext --inplace (needs kernarg installed; nothing else)."""
from setuptools import Extension, setup

import kernarg

setup(
    name="kernarg-example",
    ext_modules=[Extension("kernarg_example", ["kernarg_example.c"],
                           include_dirs=[kernarg.get_include()], libraries=["dl"])],
)
