//! The app's files, embedded at build time from `crates/web/app/` (see `build.rs`).

include!(concat!(env!("OUT_DIR"), "/assets.rs"));

/// The embedded file for a request path: `/` is `/index.html`, a folder path its `index.html`.
pub(crate) fn find(path: &str) -> Option<(&'static str, &'static [u8])> {
    let lookup = |wanted: &str| {
        ASSETS
            .binary_search_by(|(url, _, _)| (*url).cmp(wanted))
            .ok()
            .and_then(|index| ASSETS.get(index))
            .map(|(_, content_type, bytes)| (*content_type, *bytes))
    };
    if path.ends_with('/') {
        return lookup(&format!("{path}index.html"));
    }
    lookup(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_and_has_the_index() {
        assert!(ASSETS.windows(2).all(|pair| pair[0].0 < pair[1].0));
        let (content_type, bytes) = find("/").expect("index.html is embedded");
        assert!(content_type.starts_with("text/html"));
        assert!(!bytes.is_empty());
        assert!(find("/no-such-file.js").is_none());
        assert!(find("/../Cargo.toml").is_none());
    }
}
