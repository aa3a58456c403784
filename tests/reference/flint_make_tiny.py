#!/usr/bin/python3
"""ctest fixture: (re)makes a checkpoint with `flint make-tiny OUT ARGS...`.

Exits 77 (ctest SKIP_RETURN_CODE) while the flint binary has no make-tiny command, after
removing OUT so that the tests using it skip too instead of reading a stale checkpoint.

  /usr/bin/python3 flint_make_tiny.py FLINT OUT --preset tiny --seed 7
"""
import shutil
import subprocess
import sys

from compare_logits import SKIP, flint_has_command


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    flint, out, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
    shutil.rmtree(out, ignore_errors=True)
    if not flint_has_command(flint, "make-tiny"):
        print(f"{flint} has no `make-tiny` command yet: skipped")
        return SKIP
    return subprocess.run([flint, "make-tiny", out] + rest).returncode


if __name__ == "__main__":
    sys.exit(main())
