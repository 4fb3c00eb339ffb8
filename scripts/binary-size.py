#!/usr/bin/env python3
"""Where a release binary's bytes come from, by crate, read off the linker's map file.

Usage:
  scripts/binary-size.py [--top N] [--sections] MAP

Make the map with one extra link argument on the final crate only (nothing else rebuilds):
  cargo rustc --release --locked -p dsh --bin dsh -- -C link-arg=-Wl,-Map=/tmp/dsh.map

Every allocated input section (code, read-only data, relocated data, unwind tables) is charged
to the object it came from: a Rust codegen unit carries its crate's name (`<crate>-<hash>.
<crate>.<hash>-cgu.N.rcgu.o`), a C library's objects come out of its `lib*.a` or `*.rlib`. After
thin LTO a function inlined into another crate's unit counts there, so read the figures as
"the code each crate's units ended up holding", not as a precise cost of each dependency.
"""

import argparse
import collections
import re
import sys

KINDS = (".text", ".rodata", ".data.rel.ro", ".data", ".bss", ".tbss", ".tdata", ".eh_frame", ".gcc_except_table")
# lld (rustc's default linker here): `VMA LMA SIZE ALIGN <indent> origin:(section)`.
LLD_INPUT = re.compile(r"^\s*[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)\s+\d+\s+(\S.*?):\((\.[^)]*)\)$")
# GNU ld: ` section  0xADDR  0xSIZE  origin` (a long section name alone on the line before).
GNU_INPUT = re.compile(r"^\s*(\.\S+)?\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+(\S.*)$")


def crate_of(origin: str) -> str:
    """The crate an input object belongs to."""
    name = origin.rsplit("/", 1)[-1]
    archive = re.match(r"lib([A-Za-z0-9_]+?)(?:-[0-9a-f]{16})?\.(?:rlib|a)(?:\((.*)\))?$", name)
    if archive:
        return archive.group(1)
    # thin-LTO objects: `<bin>-<hash>.<crate>-<hash>.<crate>.<hash>-cgu.N.rcgu.o`
    parts = name.split(".")
    if len(parts) > 2 and "-cgu" not in parts[1]:
        return re.sub(r"-[0-9a-f]{16}$", "", parts[1])
    return re.sub(r"-[0-9a-f]{16}$", "", parts[0])


def kind_of(section: str):
    return next((k for k in KINDS if section == k or section.startswith(k + ".")), None)


def entries(path):
    """(section, size, origin) of every input section in the map."""
    pending = None
    with open(path, errors="replace") as f:
        for line in f:
            m = LLD_INPUT.match(line)
            if m:
                yield m.group(3), int(m.group(1), 16), m.group(2)
                continue
            stripped = line.strip()
            if stripped.startswith(".") and " " not in stripped:
                pending = stripped
                continue
            m = GNU_INPUT.match(line)
            if m:
                section = m.group(1) or pending
                pending = None
                if section:
                    yield section, int(m.group(3), 16), m.group(4).strip()
            else:
                pending = None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("map")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--sections", action="store_true", help="also split each crate by output section")
    args = ap.parse_args()

    by_crate = collections.Counter()
    by_section = collections.Counter()
    by_crate_section = collections.defaultdict(collections.Counter)
    for section, size, origin in entries(args.map):
        kind = kind_of(section)
        if kind is None or size == 0 or origin.startswith("<internal>"):
            continue
        crate = crate_of(origin)
        by_crate[crate] += size
        by_section[kind] += size
        by_crate_section[crate][kind] += size

    total = sum(by_crate.values())
    print(f"{'bytes':>12}  {'share':>6}  crate")
    for crate, size in by_crate.most_common(args.top):
        line = f"{size:>12,}  {100 * size / total:5.1f}%  {crate}"
        if args.sections:
            split = ", ".join(f"{k} {v // 1024} KiB" for k, v in by_crate_section[crate].most_common(4))
            line += f"  ({split})"
        print(line)
    rest = total - sum(s for _, s in by_crate.most_common(args.top))
    print(f"{rest:>12,}  {100 * rest / total:5.1f}%  ({len(by_crate) - args.top} more)")
    print(f"{total:>12,}  100.0%  total")
    print()
    for kind, size in by_section.most_common():
        print(f"{size:>12,}  {kind}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
