__all__ = ["get_include"]

_C_API: object

def get_include() -> str: ...
