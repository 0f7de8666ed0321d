#!/usr/bin/env python3
"""Prints the ninja targets of a meson build that scripts/test.sh needs:
every target but the benchmark programs (tests/bench, run by
scripts/bench-*.sh, never by the tests) and those under the directories
given with --skip (relative to the source tree).

    scripts/test-targets.py BUILD_DIR [--skip tests/e2e ...]

A sanitizer build compiles what its tests run and nothing else; a target
that a test needs but that is skipped here fails that test loudly (its
program is missing), it cannot pass by accident.
"""
import argparse
import json
import os
import subprocess
import sys


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir")
    ap.add_argument("--skip", action="append", default=[], help="a source directory whose targets are not built")
    args = ap.parse_args()
    out = subprocess.run(["meson", "introspect", "--targets", args.build_dir], check=True, capture_output=True,
                         text=True).stdout
    build = os.path.realpath(args.build_dir)
    src = os.path.realpath(os.path.join(os.path.dirname(__file__), ".."))
    skip = [os.path.join(src, d.rstrip("/")) + "/" for d in ["tests/bench"] + args.skip]
    names = []
    for t in json.loads(out):
        if t["type"] == "run" or not t.get("build_by_default", True):
            continue
        defined_in = os.path.realpath(t["defined_in"])
        if any(defined_in.startswith(s) for s in skip):
            continue
        names += [os.path.relpath(f, build) for f in t["filename"]]
    if not names:
        print("test-targets.py: no targets found in " + args.build_dir, file=sys.stderr)
        return 1
    print("\n".join(names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
