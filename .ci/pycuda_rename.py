# SPDX-License-Identifier: MIT
"""Copy PyCUDA's tests and examples with only their imports changed to barecuda.

    python .ci/pycuda_rename.py PYCUDA_CHECKOUT DEST

Every Python *name* token ``pycuda`` becomes ``barecuda`` (``import pycuda.driver``,
``pycuda.driver.init()``); strings and comments are left alone, so kernel source that
includes ``pycuda-complex.hpp`` is compiled exactly as PyCUDA's users wrote it.
Used by .ci/pycuda; nothing of PyCUDA's is kept in this repository.
"""

import io
import os
import shutil
import sys
import tokenize


def rename(text):
    """The source `text` with every NAME token 'pycuda' spelled 'barecuda'."""
    lines = text.splitlines(keepends=True)
    spots = [tok.start for tok in tokenize.generate_tokens(io.StringIO(text).readline)
             if tok.type == tokenize.NAME and tok.string == "pycuda"]
    for row, col in reversed(spots):
        line = lines[row - 1]
        lines[row - 1] = line[:col] + "barecuda" + line[col + len("pycuda"):]
    return "".join(lines)


def main(src, dest):
    for sub in ("test", "examples"):
        top = os.path.join(src, sub)
        for root, _dirs, files in os.walk(top):
            out_dir = os.path.join(dest, os.path.relpath(root, src))
            os.makedirs(out_dir, exist_ok=True)
            for name in files:
                path = os.path.join(root, name)
                if name.endswith(".py"):
                    with open(path, encoding="utf-8") as f:
                        text = f.read()
                    try:
                        text = rename(text)
                    except (tokenize.TokenError, SyntaxError, IndentationError) as e:
                        print(f"{path}: left as it is ({e})", file=sys.stderr)
                    with open(os.path.join(out_dir, name), "w", encoding="utf-8") as f:
                        f.write(text)
                else:
                    shutil.copy(path, os.path.join(out_dir, name))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
