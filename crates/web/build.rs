//! Embeds every file under `app/` in the binary: generates `assets.rs` in `OUT_DIR`, a sorted
//! table of `(url path, content type, bytes)` with `include_bytes!` of each file, so the app's
//! authors add files without touching Rust.

use std::fmt::Write as _;
use std::path::Path;
use std::path::PathBuf;

fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" | "map" => "application/json",
        "webmanifest" => "application/manifest+json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "jpg" | "jpeg" => "image/jpeg",
        "webp" => "image/webp",
        "woff2" => "font/woff2",
        "txt" | "md" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    println!("cargo:rerun-if-changed={}", dir.display());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        // Editor droppings and hidden files are not part of the app.
        if name.to_string_lossy().starts_with('.') || name.to_string_lossy().ends_with('~') {
            continue;
        }
        if path.is_dir() {
            walk(&path, out);
        } else {
            println!("cargo:rerun-if-changed={}", path.display());
            out.push(path);
        }
    }
}

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default()).join("app");
    let mut files = Vec::new();
    walk(&root, &mut files);
    let mut entries: Vec<(String, PathBuf)> = files
        .into_iter()
        .filter_map(|path| {
            let relative = path.strip_prefix(&root).ok()?.to_str()?.replace('\\', "/");
            Some((format!("/{relative}"), path))
        })
        .collect();
    entries.sort();
    let mut code = String::from("pub(crate) static ASSETS: &[(&str, &str, &[u8])] = &[\n");
    for (url, path) in &entries {
        let _ = writeln!(
            code,
            "    ({url:?}, {:?}, include_bytes!({:?})),",
            content_type(path),
            path.display().to_string()
        );
    }
    code.push_str("];\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default()).join("assets.rs");
    if let Err(error) = std::fs::write(&out, code) {
        panic!("cannot write {}: {error}", out.display());
    }
}
