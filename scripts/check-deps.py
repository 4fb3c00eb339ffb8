#!/usr/bin/env python3
"""Dependency hygiene of the workspace, run by .ci/run.

1. Layering: the crate table of docs/architecture.md lists every crate; a crate may depend
   (normal and build dependencies) only on dsh crates listed above it.
2. No unused dependency: every dependency a crate declares is named in its sources: a normal
   or build dependency in the code it builds (src/, build.rs), a dev-dependency anywhere
   (also tests/, benches/, examples/). A normal dependency only tests name belongs in
   [dev-dependencies].
3. No unused workspace dependency: every `[workspace.dependencies]` entry is used by a crate.
4. Front-ends render, they do not decode: `dsh-acp`, `dsh-tui`, `dsh-headless` and
   `dsh-sdk-server` depend (normal and build dependencies) on no capability crate (`dsh-tool-*`, `dsh-plan-mode`,
   `dsh-goal`, `dsh-subagent*`). A plugin reaches them through the transcript's presenters,
   the command registry or a trait in `dsh-plugin`; their tests may still mount real tools.

Exits 1 with one line per problem.
"""

import pathlib
import re
import sys
import tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent
PATH_ATTR = re.compile(r'#\[path\s*=\s*"([^"]+)"\]')
ROW = re.compile(r"^\| `crates/([^`]+)` \| `([^`]+)` \|")

# Dependencies a crate needs without naming them in code: features or links only.
NOT_NAMED = {
    # (crate package, dependency): why
}


# Front-ends and the capability crates they must not name (rule 4).
FRONT_ENDS = {"dsh-acp", "dsh-tui", "dsh-headless", "dsh-sdk-server", "dsh-web"}
CAPABILITY = re.compile(r"^dsh-(tool-.*|plan-mode|goal|subagent(-.*)?)$")


def table_order():
    ranks = {}
    for line in (ROOT / "docs/architecture.md").read_text().splitlines():
        match = ROW.match(line)
        if match:
            ranks[match.group(2)] = len(ranks)
    return ranks


def sources(crate_dir, subs=("src", "tests", "benches", "examples")):
    files = []
    for sub in subs:
        files.extend((crate_dir / sub).rglob("*.rs"))
    build = crate_dir / "build.rs"
    if build.exists():
        files.append(build)
    # `#[path = "..."]` modules shared from another crate's folder count as this crate's code.
    seen = set(files)
    for path in list(files):
        for target in PATH_ATTR.findall(path.read_text(errors="replace")):
            shared = (path.parent / target).resolve()
            if shared.exists() and shared not in seen:
                seen.add(shared)
                files.append(shared)
                if shared.name == "mod.rs":
                    for extra in shared.parent.rglob("*.rs"):
                        if extra not in seen:
                            seen.add(extra)
                            files.append(extra)
    return "\n".join(path.read_text(errors="replace") for path in files)


def declared(manifest, section):
    table = manifest.get(section, {})
    out = {}
    for name, spec in table.items():
        package = spec.get("package", name) if isinstance(spec, dict) else name
        out[name] = package
    return out


def main():
    problems = []
    ranks = table_order()
    workspace = tomllib.loads((ROOT / "Cargo.toml").read_text())
    used_anywhere = set()
    crates = sorted(p.parent for p in (ROOT / "crates").glob("*/Cargo.toml"))
    for crate_dir in crates:
        manifest = tomllib.loads((crate_dir / "Cargo.toml").read_text())
        package = manifest["package"]["name"]
        if package not in ranks:
            problems.append(
                f"{package}: not in the crate table of docs/architecture.md"
            )
            continue
        text = sources(crate_dir)
        built = sources(crate_dir, ("src",))
        for section in ("dependencies", "build-dependencies", "dev-dependencies"):
            for name, dep_package in declared(manifest, section).items():
                used_anywhere.add(name)
                if section != "dev-dependencies" and dep_package.startswith("dsh-"):
                    if dep_package not in ranks:
                        problems.append(f"{package}: depends on {dep_package}, which is not in the table")
                    elif ranks[dep_package] >= ranks[package]:
                        problems.append(
                            f"{package}: depends upward on {dep_package} (listed below it in docs/architecture.md)"
                        )
                if (
                    section != "dev-dependencies"
                    and package in FRONT_ENDS
                    and CAPABILITY.match(dep_package)
                ):
                    problems.append(
                        f"{package}: a front-end depends on the capability crate {dep_package} "
                        "(render its events through a presenter; reach its service through a "
                        "trait in dsh-plugin)"
                    )
                ident = name.replace("-", "_")
                if (package, name) in NOT_NAMED:
                    continue
                if not re.search(rf"\b{re.escape(ident)}\b", text):
                    problems.append(f"{package}: [{section}] {name} is never used")
                elif section != "dev-dependencies" and not re.search(
                    rf"\b{re.escape(ident)}\b", built
                ):
                    problems.append(
                        f"{package}: [{section}] {name} is only used by tests (move it to [dev-dependencies])"
                    )
    for name, spec in workspace.get("workspace", {}).get("dependencies", {}).items():
        # Our own crates are declared here so members can name them; one may wait for users.
        if isinstance(spec, dict) and "path" in spec:
            continue
        if name not in used_anywhere:
            problems.append(f"workspace: [workspace.dependencies] {name} is used by no crate")
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
