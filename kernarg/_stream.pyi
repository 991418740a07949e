from types import TracebackType
from typing import Any

__all__ = [
    "LEGACY_DEFAULT_STREAM",
    "PER_THREAD_DEFAULT_STREAM",
    "default_stream",
    "resolve_stream",
    "use_stream",
]

LEGACY_DEFAULT_STREAM: int
PER_THREAD_DEFAULT_STREAM: int
_POLICY_DEFAULT: int
GUARDED: bool

def _reload_policy() -> int: ...
def default_stream() -> int: ...
def resolve_stream(obj: Any) -> int: ...

class use_stream:
    def __init__(self, stream: Any) -> None: ...
    def __enter__(self) -> int: ...
    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool: ...
