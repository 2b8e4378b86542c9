# SPDX-License-Identifier: MIT
"""Source that NVRTC reads differently from nvcc, made to mean what nvcc makes of it.

nvcc's front end emulates GCC (``--gnu_version``), NVRTC's does not, and NVRTC has no
option to ask for it.  One difference changes data layout silently: GCC applies a type
attribute written just past the closing brace of a struct, union, class or enum
definition to the type::

    typedef struct { int a; char b; } __align__(16) pair;       /* sizeof(pair) == 16 */

NVRTC accepts the line and drops the attribute (``sizeof(pair) == 8``), so a struct laid
out to match a NumPy dtype (``numpy.dtype(..., align=True)``, or a dtype with an
explicit itemsize) disagrees with it on the device.  Code generators built for PyCUDA
write structs this way (grunnur's ``dtypes.ctype``, through ``#define ALIGN(n)
__align__(n)``).  ``gnu_type_attributes`` moves such an attribute (or a use of a
function-like macro of the same source that expands to one) to just after the
``struct`` keyword, where NVRTC applies it as GCC would, keeping every line where it
was so that compile errors still point at the user's lines.  Attributes inside headers
the source includes are not seen.
"""

from __future__ import annotations

import re

# The cheap test that leaves most sources alone: an attribute, or a function-like
# macro that expands to one (``#define ALIGN(n) __align__(n)``, as code generators write).
_CANDIDATE = re.compile(r"\}\s*(?:__align__|__attribute__)\s*\(|#\s*define\s+\w+\([^)]*\)\s*"
                        r"(?:__align__|__attribute__)\b")
_MACRO = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)\([^)]*\)[ \t]*"
                    r"(?:__align__|__attribute__)\b", re.M)
_HEAD = re.compile(r"\b(struct|union|class|enum)\b(?:\s+[A-Za-z_]\w*)?\s*(?::[^{;()]*)?$")
_SPACE = re.compile(r"(?:\s+|//[^\n]*|/\*.*?\*/)*", re.S)


def _skip_literal(text: str, i: int) -> int:
    """The index past the comment or literal starting at text[i], or i if none starts there."""
    c = text[i]
    if c == "/" and text.startswith("//", i):
        end = text.find("\n", i)
        return len(text) if end < 0 else end
    if c == "/" and text.startswith("/*", i):
        end = text.find("*/", i + 2)
        return len(text) if end < 0 else end + 2
    if c in "\"'":
        j = i + 1
        while j < len(text) and text[j] != c and text[j] != "\n":
            j += 2 if text[j] == "\\" else 1
        return j + 1
    return i


def _balanced(text: str, open_at: int) -> int:
    """The index past the parenthesis that closes the one at text[open_at], or -1."""
    depth = 0
    for j in range(open_at, len(text)):
        if text[j] == "(":
            depth += 1
        elif text[j] == ")":
            depth -= 1
            if depth == 0:
                return j + 1
    return -1


def gnu_type_attributes(text: str) -> str:
    """`text` with each attribute after a struct/union/class/enum definition's closing
    brace moved after its keyword; other text (and the count of lines) unchanged."""
    if _CANDIDATE.search(text) is None:
        return text
    names = ["__align__", "__attribute__"] + _MACRO.findall(text)
    attribute_at = re.compile(r"(?:%s)\s*\(" % "|".join(map(re.escape, names)))
    opens: list[int] = []
    moves: list[tuple[int, int, int]] = []   # (keyword end, attribute start, attribute end)
    i, n = 0, len(text)
    while i < n:
        j = _skip_literal(text, i)
        if j != i:
            i = j
            continue
        c = text[i]
        if c == "{":
            opens.append(i)
        elif c == "}" and opens:
            start = opens.pop()
            after = _SPACE.match(text, i + 1).end()
            attr = attribute_at.match(text, after)
            head = _HEAD.search(text, max(0, start - 256), start)
            if attr is not None and head is not None:
                end = _balanced(text, attr.end() - 1)
                if end > 0 and "\n" not in text[after:end]:
                    moves.append((head.end(1), after, end))
        i += 1
    # Each move is two edits (cut the attribute, insert it after the keyword); applied
    # from the end of the text backwards, no edit shifts one still to come.
    edits = [(a, b, "") for _, a, b in moves]
    edits += [(k, k, " " + text[a:b]) for k, a, b in moves]
    for a, b, insert in sorted(edits, reverse=True):
        text = text[:a] + insert + text[b:]
    return text
