"""The .pyi stubs say what the compiled modules have: every public module name, class member
and function is in its stub, and the stub names nothing the module lacks. (Editors and type
checkers see only the stubs; a method added to a .pyx and not to its .pyi is invisible.)"""
import ast
import importlib
import inspect
import pathlib

import pytest

import kernarg

STUBS = sorted(pathlib.Path(kernarg.__file__).parent.glob("_*.pyi"))
# Names a stub may hold that the runtime does not: type aliases, and the buffer protocol's
# __buffer__ (Python 3.12's name for what Cython implements as a C slot).
STUB_ONLY = {"Dims", "ClusterScheduling", "MemSyncDomain", "AccessPolicy", "DomainMap",
             "ClusterSizeMode", "ShmemMode", "__buffer__"}


def _stub_names(path):
    """{top-level name: set of member names (for classes) or None}."""
    out = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ClassDef):
            members = set()
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    members.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    members.add(item.target.id)
            out[node.name] = members
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out[node.name] = None
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = None
        elif isinstance(node, ast.Assign):
            out.update((t.id, None) for t in node.targets if isinstance(t, ast.Name))
    return out


# Special methods a stub must declare when the class has them (the rest come from object).
DUNDERS = {"__call__", "__enter__", "__exit__", "__len__", "__getitem__", "__iter__"}


def _public(cls):
    return {n for n in dir(cls) if not n.startswith("_") or n in DUNDERS}


@pytest.mark.parametrize("stub", STUBS, ids=[p.stem for p in STUBS])
def test_stub_matches_the_module(stub):
    module = importlib.import_module(f"kernarg.{stub.stem}")
    names = _stub_names(stub)
    exported = set(getattr(module, "__all__", ()))
    missing = exported - set(names)
    assert not missing, f"{stub.name} lacks {sorted(missing)}"
    for name, members in names.items():
        if name in STUB_ONLY or name == "__all__":
            continue
        assert hasattr(module, name), f"{stub.name}: {name} is not in {module.__name__}"
        if members is None:
            continue
        cls = getattr(module, name)
        assert inspect.isclass(cls), name
        runtime = _public(cls)
        assert not runtime - members, \
            f"{stub.name}: {name} has {sorted(runtime - members)}, which the stub lacks"
        extra = {m for m in members - STUB_ONLY if not hasattr(cls, m)}
        assert not extra, f"{stub.name}: {name}.{sorted(extra)} is not in the module"
