#!/usr/bin/python3
"""CMake/meson drift guard: both builds must compile the same .cc files,
define the same libraries and programs, and register the same test groups.

    /usr/bin/python3 tests/common/build_drift.py [SOURCE_DIR]

Reads every CMakeLists.txt and meson.build in the tree (build directories
excluded), resolves each .cc path against the file's directory, and prints
what one build has and the other lacks. Exit status 1 on any difference.
A CTest entry (rocemu_build_drift:unit) and a meson test run it.
"""
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))

CC_RE = re.compile(r"[\w${}./+-]+\.cc\b")
CMAKE_TARGET_RE = re.compile(r"\b(?:add_library|add_executable|rocemu_add_tests)\(\s*([\w.+-]+)")
MESON_TARGET_RE = re.compile(r"\b(?:static_library|shared_library|library|executable)\(\s*'([\w.+-]+)'")
CMAKE_TAGS_RE = re.compile(r"\brocemu_add_tests\(\s*([\w.+-]+)\s+TAGS\s+([^)]*?)\s+(?:SOURCES|LIBS)\b", re.S)
CMAKE_TEST_RE = re.compile(r"\badd_test\(\s*NAME\s+([\w.+-]+):(\w+)")
MESON_FOREACH_RE = re.compile(r"foreach\s+tag\s*:\s*\[([^\]]*)\]\s*test\(\s*'([\w.+-]+)-'\s*\+\s*tag", re.S)
MESON_TEST_RE = re.compile(r"\btest\(\s*'([\w.+-]+)-(\w+)'")


def strip_comments(text, quote):
    """Drops '#' comments outside strings delimited by `quote`."""
    out = []
    for line in text.splitlines():
        in_str = False
        for i, ch in enumerate(line):
            if ch == quote:
                in_str = not in_str
            elif ch == "#" and not in_str:
                line = line[:i]
                break
        out.append(line)
    return "\n".join(out)


def build_files(name):
    for dirpath, dirnames, filenames in os.walk(ROOT):
        if dirpath == ROOT:
            dirnames[:] = [d for d in dirnames if not d.startswith(("build", ".")) and d != "subprojects"]
        else:
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        if name in filenames:
            yield os.path.join(dirpath, name)


def resolve(path, here):
    path = path.replace("${PROJECT_SOURCE_DIR}", ROOT).replace("${CMAKE_SOURCE_DIR}", ROOT)
    path = path.replace("${CMAKE_CURRENT_SOURCE_DIR}", here)
    return os.path.relpath(os.path.normpath(os.path.join(here, path)), ROOT)


def scan(name, quote):
    sources, targets, tests = set(), set(), set()
    for f in build_files(name):
        here = os.path.dirname(f)
        with open(f, encoding="utf-8") as fh:
            text = strip_comments(fh.read(), quote)
        sources |= {resolve(m, here) for m in CC_RE.findall(text)}
        if name == "CMakeLists.txt":
            targets |= set(CMAKE_TARGET_RE.findall(text))
            for binary, tags in CMAKE_TAGS_RE.findall(text):
                tests |= {(binary, t) for t in tags.split()}
            tests |= set(CMAKE_TEST_RE.findall(text))
        else:
            targets |= set(MESON_TARGET_RE.findall(text))
            for tags, binary in MESON_FOREACH_RE.findall(text):
                tests |= {(binary, t) for t in re.findall(r"'(\w+)'", tags)}
            tests |= set(MESON_TEST_RE.findall(text))
    return sources, targets, tests


def main():
    cmake = scan("CMakeLists.txt", '"')
    meson = scan("meson.build", "'")
    ok = True
    for what, c, m in zip(("source", "target", "test"), cmake, meson):
        fmt = (lambda x: f"{x[0]} [{x[1]}]") if what == "test" else str
        for x in sorted(c - m):
            print(f"{what} {fmt(x)}: in a CMakeLists.txt, missing from the meson.build files")
            ok = False
        for x in sorted(m - c):
            print(f"{what} {fmt(x)}: in a meson.build, missing from the CMakeLists.txt files")
            ok = False
    if not cmake[0] or not cmake[1]:
        print(f"no sources or targets found under {ROOT}")
        ok = False
    if ok:
        print(f"CMake and meson agree: {len(cmake[0])} sources, {len(cmake[1])} targets, {len(cmake[2])} test groups")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
