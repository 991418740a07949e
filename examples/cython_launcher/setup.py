"""Build: python setup.py build_ext --inplace (needs kernarg and Cython installed)."""
import os

from Cython.Build import cythonize
from setuptools import Extension, setup

import kernarg

# Cython finds kernarg's .pxd files next to the installed package.
package_parent = os.path.dirname(os.path.dirname(os.path.abspath(kernarg.__file__)))

setup(
    name="kernarg-cython-launcher",
    ext_modules=cythonize(
        [Extension("launcher", ["launcher.pyx"], include_dirs=[kernarg.get_include()])],
        include_path=[package_parent],
        compiler_directives={"language_level": 3},
    ),
)
