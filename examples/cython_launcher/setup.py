"""Build: python setup.py build_ext --inplace (needs kernarg and Cython installed)."""
import os
import sysconfig

from Cython.Build import cythonize
from setuptools import Extension, setup

import kernarg

directives = {"language_level": 3}
if sysconfig.get_config_var("Py_GIL_DISABLED"):
    # Its blocks live on the C stack and kernarg's C API guards kernarg's own state: safe
    # without the GIL, so a free-threaded CPython keeps it off (Cython >= 3.1).
    directives["freethreading_compatible"] = True

# Cython finds kernarg's .pxd files next to the installed package.
package_parent = os.path.dirname(os.path.dirname(os.path.abspath(kernarg.__file__)))

setup(
    name="kernarg-cython-launcher",
    ext_modules=cythonize(
        [Extension("launcher", ["launcher.pyx"], include_dirs=[kernarg.get_include()])],
        include_path=[package_parent],
        compiler_directives=directives,
    ),
)
