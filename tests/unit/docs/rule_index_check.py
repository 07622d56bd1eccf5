#!/usr/bin/env python3
"""Checks docs/architecture.md's "Rule index" (issue 27 item 5) against the code.

- every function a row names is still defined in the file the row gives (`Class::name(` in a
  source file; in a header, the class and `name(`);
- every test a row names (`Suite.Name`) is still a GoogleTest test under tests/;
- every RFC 7143 / RFC 7145 section an engine source cites in a comment appears in some row's
  rule column, so a rule added to an engine without a row here fails this check.
Exit 0 when all hold; otherwise 1 with one line per problem.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[3]
ENGINE_SOURCES = [
    "initiator/src/session_engine.cpp",
    "initiator/src/session_engine_receive.cpp",
    "initiator/src/session_engine.hpp",
    "target/src/session_engine.cpp",
    "target/src/session_engine.hpp",
    "target/src/write_sequencer.cpp",
    "target/src/write_sequencer.hpp",
    "target/src/cmd_sn_window.hpp",
    "target/src/data_phase.cpp",
]
SECTION = re.compile(r"§(\d+(?:\.\d+)*)")
RFC = re.compile(r"RFC (7143|7145)\b")


def index_rows(text):
    """The table rows of the "Rule index" section: (rule, functions, tests) cells."""
    m = re.search(r"^## Rule index.*?$(.*?)(?=^## |\Z)", text, re.S | re.M)
    if not m:
        return None
    rows = []
    for line in m.group(1).splitlines():
        if not line.startswith("| ") or line.startswith("| rule ") or line.startswith("|---"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if len(cells) != 3:
            raise SystemExit(f"rule index: a row without three cells: {line[:80]}")
        rows.append(cells)
    return rows


def cited_sections(rule):
    """(rfc, section) pairs a rule cell names: each § belongs to the last RFC named before it."""
    found, rfc = set(), None
    for token in re.finditer(r"RFC (\d+)|\b(?:SAM|SPC|SBC|SCSI)-\d|§(\d+(?:\.\d+)*)", rule):
        if token.group(2) is None:
            rfc = token.group(1) if token.group(1) in ("7143", "7145") else None  # another standard
        elif rfc:
            found.add((rfc, token.group(2)))
    return found


def covered(rfc, section, indexed):
    """A section is covered by its own row or, for a chapter cited as a whole (a file header's
    "§11.7"), by a row for one of its subsections."""
    return any(r == rfc and (s == section or s.startswith(section + ".")) for r, s in indexed)


def functions_of(cell):
    """(name, path) pairs: each `name` belongs to the next (path) after it."""
    pairs, pending = [], []
    for token in re.finditer(r"`([^`]+)`|\(([\w./-]+\.(?:cpp|hpp))\)", cell):
        if token.group(1):
            pending.append(token.group(1))
        else:
            pairs += [(name, token.group(2)) for name in pending]
            pending = []
    return pairs, pending


def defined(name, path):
    source = (ROOT / path).read_text(errors="replace")
    if "::" in name:
        cls, method = name.rsplit("::", 1)
        if re.search(re.escape(name) + r"\(", source):
            return True
        return bool(re.search(r"\b(class|struct) " + re.escape(cls) + r"\b", source)) and \
            bool(re.search(r"\b" + re.escape(method) + r"\(", source)) and path.endswith(".hpp")
    return bool(re.search(r"^\S.*\b" + re.escape(name) + r"\(", source, re.M))


def main():
    problems = []
    rows = index_rows((ROOT / "docs/architecture.md").read_text())
    if rows is None:
        print("docs/architecture.md has no '## Rule index' section")
        return 1
    tests = set()
    for f in (ROOT / "tests").rglob("*.cpp"):
        for m in re.finditer(r"^TEST(?:_F|_P)?\(\s*(\w+)\s*,\s*(\w+)\s*\)", f.read_text(errors="replace"), re.M):
            tests.add(f"{m.group(1)}.{m.group(2)}")
    indexed = set()
    for rule, funcs, test_cell in rows:
        indexed |= cited_sections(rule)
        pairs, orphans = functions_of(funcs)
        if orphans or not pairs:
            problems.append(f"row '{rule[:60]}': every function needs a (file) after it")
        for name, path in pairs:
            if not (ROOT / path).is_file():
                problems.append(f"row '{rule[:60]}': no file {path}")
            elif not defined(name, path):
                problems.append(f"row '{rule[:60]}': {name} is not defined in {path}")
        named = re.findall(r"`(\w+\.\w+)`", test_cell)
        if not named:
            problems.append(f"row '{rule[:60]}': no test named")
        for t in named:
            if t not in tests:
                problems.append(f"row '{rule[:60]}': no test {t} under tests/")
    for path in ENGINE_SOURCES:
        for n, line in enumerate((ROOT / path).read_text(errors="replace").splitlines(), 1):
            if "//" not in line or not RFC.search(line):
                continue
            for rfc, section in cited_sections(line[line.index("//"):]):
                if not covered(rfc, section, indexed):
                    problems.append(f"{path}:{n}: RFC {rfc} §{section} is cited but has no row in the rule index")
    for p in problems:
        print(p)
    print(f"rule index: {len(rows)} rows, {len(tests)} tests known, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
