from collections.abc import Callable
from typing import Any

__all__ = ["register", "registered_types", "DLPACK_MAX_VERSION"]

DLPACK_MAX_VERSION: tuple[int, int]

def register(cls: type, fn: Callable[[Any], int] | None) -> None: ...
def registered_types() -> tuple[type, ...]: ...
