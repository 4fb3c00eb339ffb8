//! Link-time settings of the binaries.
//!
//! A large PIE carries one relative relocation per pointer in its static data (about 82,000 in
//! the release `dsh`, 1.9 MB of `.rela.dyn`). The dynamic loader reads all of them at every
//! start, so those pages are resident in every run. `-z pack-relative-relocs` (DT_RELR) packs
//! them into a few KB, keeping the binary position-independent (ASLR stays).
//!
//! It needs GNU ld ≥ 2.38 (or lld ≥ 15) to link and glibc ≥ 2.36 to run: the linker records a
//! `GLIBC_ABI_DT_RELR` version dependency, so an older glibc refuses the binary at load instead
//! of misrunning it. The flag is only passed when a probe program links with it and runs here,
//! which also keeps cross builds (that cannot run the probe) on the plain layout.
#![allow(
    clippy::disallowed_methods,
    reason = "a build script probes the toolchain; no child of dsh"
)]

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=DSH_NO_RELR");
    let target = std::env::var("TARGET").unwrap_or_default();
    let host = std::env::var("HOST").unwrap_or_default();
    if std::env::var_os("DSH_NO_RELR").is_some()
        || target != host
        || !target.contains("-linux-gnu")
        || !relr_links_and_runs()
    {
        return;
    }
    println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
}

/// Links a one-line C program with the flag through the default linker driver (`cc`, what
/// rustc calls) and runs it.
fn relr_links_and_runs() -> bool {
    let Some(out) = std::env::var_os("OUT_DIR").map(PathBuf::from) else {
        return false;
    };
    let source = out.join("relr_probe.c");
    let program = out.join("relr_probe");
    // A pointer in writable data is what makes a relative relocation in a PIE.
    let probe = "static int x; int *p = &x; int main(void) { return *p; }\n";
    if std::fs::write(&source, probe).is_err() {
        return false;
    }
    let linked = Command::new("cc")
        .arg("-pie")
        .arg("-fPIE")
        .arg("-Wl,-z,pack-relative-relocs")
        .arg(&source)
        .arg("-o")
        .arg(&program)
        .output()
        .is_ok_and(|o| o.status.success());
    linked && Command::new(&program).status().is_ok_and(|s| s.success())
}
