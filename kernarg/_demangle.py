"""The C++ name of a kernel's or variable's mangled symbol (Itanium C++ ABI, section 5.1), as far
as naming it needs: ``_ZN2ns5innerIfEEvT_`` is ``ns::inner`` with template arguments
``[float]``, and ``_Z4litsILb1ELc65EEvi`` is ``lits`` with ``[true, 65]``.

Only the name is read, not the function's parameter types after it: nested names, ``std::``,
template arguments (types, parameter packs, integer and bool literals) and the substitutions
(``S_``, ``S0_``) they refer back to. A symbol outside that (operators, local names,
expressions as template arguments, function types) is None: the caller then names the symbol
itself. Names in an anonymous namespace, NVRTC's ``_INTERNAL_`` prefix for internal linkage,
and the inline namespaces that version libcu++'s, libc++'s, CUB's and Thrust's ABI are left out
of the name, as C++ code leaves them out.

The arguments a user writes (``"axpy<const float *, 4u>"``) are compared with a symbol's through
:func:`template_key`, which reads both in one form.
"""
import re

__all__ = ["demangle", "cxx_name", "template_key"]

_BUILTINS = {
    "v": "void", "w": "wchar_t", "b": "bool", "c": "char", "a": "signed char",
    "h": "unsigned char", "s": "short", "t": "unsigned short", "i": "int", "j": "unsigned int",
    "l": "long", "m": "unsigned long", "x": "long long", "y": "unsigned long long",
    "n": "__int128", "o": "unsigned __int128", "f": "float", "d": "double", "e": "long double",
    "g": "__float128",
}
_D_BUILTINS = {"Dn": "decltype(nullptr)", "Dh": "__fp16", "Di": "char32_t", "Ds": "char16_t",
               "Du": "char8_t", "Da": "auto"}
# The abbreviations of std:: names (section 5.1.10).
_STD = {"St": "std", "Sa": "std::allocator", "Sb": "std::basic_string", "Ss": "std::string",
        "Si": "std::istream", "So": "std::ostream", "Sd": "std::iostream"}
_HIDDEN = ("_GLOBAL__N", "_INTERNAL_")      # anonymous namespaces, internal linkage
# Inline namespaces that version a library's ABI, which code leaves out as it names the library's
# types: libcu++'s and libc++'s (`cuda::std::__4::complex`), CUB's and Thrust's
# (`cub::CUB_200200_800_NS::`).
_ABI_NAMESPACE = re.compile(r"__\d+|(?:CUB|THRUST|CCCL)_\d+(?:_\d+)*_NS")


class _Unsupported(Exception):
    pass


class _Literal(int):
    """A non-type template argument: its value, and its type's name (``bool``: printed as
    true or false)."""

    def __new__(cls, value, type_name):
        self = super().__new__(cls, value)
        self.type_name = type_name
        return self

    def __str__(self):
        if self.type_name == "bool":
            return "true" if self else "false"
        return int.__repr__(self)

    __repr__ = __str__


# The most characters the names and types met while reading one symbol may add up to. Each
# prefix of a nested name is one (the ABI's substitution candidates), so a symbol of many parts
# (`_ZN1a1a1a...E`) makes text quadratic in its length, and one that refers back to long names
# many times more: past this it is read as unreadable. Real symbols, even of deep templates,
# stay far below it.
_BUDGET = 1 << 22


class _Reader:
    def __init__(self, text):
        self.s, self.i, self.subs, self.spent = text, 0, [], 0

    def candidate(self, text):
        """``text``, a name or type just read, as the next substitution candidate."""
        self.spent += len(text)
        if self.spent > _BUDGET:
            raise _Unsupported(self.i)
        self.subs.append(text)

    def peek(self, n=1):
        return self.s[self.i:self.i + n]

    def take(self, token):
        if not self.s.startswith(token, self.i):
            raise _Unsupported(self.i)
        self.i += len(token)

    def number(self):
        m = re.compile(r"n?\d+").match(self.s, self.i)
        if m is None:
            raise _Unsupported(self.i)
        self.i = m.end()
        return -int(m[0][1:]) if m[0][0] == "n" else int(m[0])

    def source_name(self):
        m = re.compile(r"[1-9]\d*").match(self.s, self.i)
        if m is None:
            raise _Unsupported(self.i)
        n, start = int(m[0]), m.end()
        if start + n > len(self.s):
            raise _Unsupported(self.i)
        self.i = start + n
        return self.s[start:start + n]

    def substitution(self):
        """``S_``, ``S<base 36>_``: a name or type met before."""
        self.take("S")
        m = re.compile(r"[0-9A-Z]*_").match(self.s, self.i)
        if m is None:
            raise _Unsupported(self.i)
        self.i = m.end()
        k = int(m[0][:-1], 36) + 1 if len(m[0]) > 1 else 0
        if k >= len(self.subs):
            raise _Unsupported(self.i)
        return self.subs[k]

    # <name>: (the qualified name's parts, the template arguments of its last part or None)
    def name(self):
        if self.peek() == "N":
            return self.nested_name()
        if self.peek() == "Z":
            raise _Unsupported(self.i)      # a local name
        if self.peek(2) in _STD and self.peek(2) != "St":
            base = [_STD[self.peek(2)]]
            self.i += 2
        elif self.peek(2) == "St":
            self.i += 2
            base = ["std", self.source_name()]
        elif self.peek() == "S":
            base = [self.substitution()]
            if self.peek() != "I":
                raise _Unsupported(self.i)     # a substitution is a name only with arguments
            return base, self.template_args()
        else:
            base = [self.source_name()]
        if self.peek() == "I":
            self.candidate(_joined(base))      # an unscoped template name is a candidate
            return base, self.template_args()
        return base, None

    def nested_name(self):
        self.take("N")
        while self.peek() in ("r", "V", "K", "R", "O"):
            self.i += 1                         # a member function's qualifiers
        parts, args = [], None
        while self.peek() != "E":
            if not self.peek():
                raise _Unsupported(self.i)
            if args is not None:                # the arguments belonged to a prefix
                parts[-1] = f"{parts[-1]}<{_args_text(args)}>"
                args = None
            if self.peek(2) in _STD:
                parts += _STD[self.peek(2)].split("::")
                self.i += 2
                continue                        # (no candidate: met before, or std's)
            elif self.peek() == "S":
                parts += self.substitution().split("::")
                continue
            elif self.peek() == "I":
                if not parts:
                    raise _Unsupported(self.i)  # arguments of no name (NIiE...)
                args = self.template_args()
            elif self.peek() == "T" or self.peek() == "D" or self.peek() == "L":
                raise _Unsupported(self.i)      # template parameters, decltype, locals
            else:
                parts.append(self.source_name())
            if self.peek() != "E":              # a prefix (or template prefix): a candidate
                self.candidate(_joined(parts if args is None else parts[:-1] + [
                    f"{parts[-1]}<{_args_text(args)}>"]))
        self.i += 1
        return parts, args

    def template_args(self):
        self.take("I")
        args = []
        while self.peek() != "E":
            if not self.peek():
                raise _Unsupported(self.i)
            if self.peek() == "J":              # a parameter pack: its arguments, in line
                self.i += 1
                while self.peek() != "E":
                    if not self.peek():
                        raise _Unsupported(self.i)
                    args.append(self.template_arg())
                self.i += 1
            else:
                args.append(self.template_arg())
        self.i += 1
        return args

    def template_arg(self):
        if self.peek() == "L":
            self.i += 1
            code = self.peek()
            if code not in _BUILTINS or code in ("v", "f", "d", "e", "g"):
                raise _Unsupported(self.i)      # an address (L_Z...), a float
            self.i += 1
            value = self.number()
            self.take("E")
            return _Literal(value, _BUILTINS[code])
        if self.peek() == "X":
            raise _Unsupported(self.i)          # an expression
        return self.type()

    def type(self):
        c = self.peek()
        if c in _BUILTINS:
            self.i += 1
            return _BUILTINS[c]
        code = self.peek(2)
        if code in _D_BUILTINS:
            self.i += 2
            return _D_BUILTINS[code]
        if c in ("r", "V", "K"):
            qualifiers = []
            while self.peek() in ("r", "V", "K"):
                qualifiers.append({"r": "__restrict__", "V": "volatile", "K": "const"}[
                    self.peek()])
                self.i += 1
            inner = self.type()
            words = " ".join(reversed(qualifiers))
            out = f"{inner} {words}" if inner.endswith(("*", "&")) else f"{words} {inner}"
        elif c in ("P", "R", "O"):
            self.i += 1
            out = self.type() + {"P": "*", "R": "&", "O": "&&"}[c]
        elif c == "A":
            self.i += 1
            n = self.number()
            self.take("_")
            out = f"{self.type()}[{n}]"
        elif c == "u":                          # a vendor's type: its name
            self.i += 1
            return self.source_name()
        elif c == "S" and self.peek(2) not in _STD:
            out = self.substitution()
            if self.peek() != "I":
                return out                      # (a candidate already)
            out = f"{out}<{_args_text(self.template_args())}>"
        elif c == "N" or c == "S" or c.isdigit():
            parts, args = self.name()
            out = _joined(parts) + (f"<{_args_text(args)}>" if args is not None else "")
        else:
            raise _Unsupported(self.i)          # template parameters, functions, members
        self.candidate(out)
        return out


def _joined(parts):
    return "::".join(p for p in parts
                     if not p.startswith(_HIDDEN) and not _ABI_NAMESPACE.fullmatch(p))


def _args_text(args):
    return ", ".join(map(str, args))


def demangle(symbol: str):
    """``(qualified name, template arguments or None)`` of a mangled symbol
    (``_ZN2ns5innerIfEEvT_``: ``('ns::inner', ['float'])``); None where it is not one, or
    uses what this reader does not (see the module's text). Each argument is a type's C++
    spelling (``'const float*'``, ``'ns::Box<int, 2>'``) or an int (a literal; bool's print as
    true and false)."""
    if not symbol.startswith("_Z"):
        return None
    reader = _Reader(symbol)
    reader.i = 2
    try:
        parts, args = reader.name()
    except (_Unsupported, ValueError, RecursionError):
        return None
    name = _joined(parts)
    if args is not None and sum(len(str(a)) for a in args) > _BUDGET:
        return None             # (one long type named again and again)
    return (name, args) if name else None


def cxx_name(symbol: str) -> str:
    """The C++ name of a mangled symbol (``'ns::inner<float>'``), or ``symbol`` itself where it
    cannot be read (see :func:`demangle`)."""
    found = demangle(symbol)
    if found is None:
        return symbol
    name, args = found
    return name if args is None else f"{name}<{_args_text(args)}>"


_INTEGER = re.compile(r"([+-]?)\s*(0[xX][0-9a-fA-F']+|0[bB][01']+|0[0-7']*|[1-9][0-9']*)"
                      r"(?:[uU](?:ll|LL|l|L|z|Z)?|(?:ll|LL|l|L|z|Z)[uU]?)?")
_CHAR = re.compile(r"'([^'\\]|\\[ntr0\\'\"abfv])'")
_ESCAPES = {"n": 10, "t": 9, "r": 13, "0": 0, "\\": 92, "'": 39, '"': 34, "a": 7, "b": 8,
            "f": 12, "v": 11}
# Integer types' other spellings, as the canonical ones the ABI's codes print.
_TYPE_WORDS = [
    (r"\bunsigned\s+long\s+long(?:\s+int)?\b|\blong\s+long\s+unsigned(?:\s+int)?\b",
     "unsigned long long"),
    (r"\bsigned\s+long\s+long(?:\s+int)?\b|\blong\s+long\s+int\b", "long long"),
    (r"\bunsigned\s+long(?:\s+int)?\b|\blong\s+unsigned(?:\s+int)?\b", "unsigned long"),
    (r"\bsigned\s+long(?:\s+int)?\b|\blong\s+int\b", "long"),
    (r"\bunsigned\s+short(?:\s+int)?\b|\bshort\s+unsigned(?:\s+int)?\b", "unsigned short"),
    (r"\bsigned\s+short(?:\s+int)?\b|\bshort\s+int\b", "short"),
    (r"\bunsigned\s+int\b|\bunsigned\b(?!\s+(?:char|short|long|__int128))", "unsigned int"),
    (r"\bsigned\s+int\b|\bsigned\b(?!\s+(?:char|short|long|__int128))", "int"),
]


def _literal_value(text: str):
    """The value of an integer, character or bool literal (``7u``, ``-9``, ``'A'``, ``true``,
    ``(3)``), or None."""
    text = text.strip()
    while text.startswith("(") and text.endswith(")"):
        text = text[1:-1].strip()
    if text in ("true", "false"):
        return int(text == "true")
    m = _CHAR.fullmatch(text)
    if m is not None:
        ch = m[1]
        return _ESCAPES[ch[1]] if ch.startswith("\\") else ord(ch)
    m = _INTEGER.fullmatch(text)
    if m is None:
        return None
    digits = m[2].replace("'", "")
    try:
        value = int(digits, 8) if re.fullmatch(r"0[0-7]+", digits) else int(digits, 0)
    except ValueError:
        return None             # separators and no digit: `0x'` (fuzz_parse, session 61)
    return -value if m[1] == "-" else value


def template_key(arg):
    """One template argument, a symbol's (from :func:`demangle`) or as a user writes it, in the
    form both compare in: an int for a literal; else the type's spelling with the spaces that
    separate no words left out, integer types spelled as the ABI prints them, and ``T const``
    as ``const T``."""
    if isinstance(arg, int):
        return int(arg)
    value = _literal_value(arg)
    if value is not None:
        return value
    text = " ".join(arg.split())
    for pattern, canonical in _TYPE_WORDS:
        text = re.sub(pattern, canonical, text)
    # `float const` -> `const float` (a pointer's own const, `float* const`, stays after it)
    # (Tried only where a name starts, not inside one or after its `::`: from every character
    # of a long name this was quadratic in its length.)
    text = re.sub(r"((?:\b(?:unsigned|signed|long|short)\s+)*(?<![\w:])[A-Za-z_][\w:]*"
                  r"(?:<[^<>]*>)?)\s+const\b", r"const \1", text)
    return re.sub(r"\s*([^\w\s])\s*", r"\1", text)
