//! The `lsp` tool's model text (`render.ts`): locations grouped by file, the location cap,
//! hovers, the final character cap (UTF-16 units), and URIs shown relative to the workspace.

use crate::translate::Hover;
use crate::translate::Location;

/// `file://` URI of an absolute path (percent-encoding what a URI path may not hold).
pub fn file_uri(path: &str) -> String {
    let mut out = String::from("file://");
    for byte in path.bytes() {
        let keep = byte.is_ascii_alphanumeric() || b"/-._~!$&'()*+,;=:@".contains(&byte);
        if keep {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

fn decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// `(host, decoded path)` of a `file:` URI.
fn file_parts(uri: &str) -> Option<(String, String)> {
    let rest = uri.strip_prefix("file:")?;
    let (host, path) = match rest.strip_prefix("//") {
        Some(after) => match after.find('/') {
            Some(slash) => (&after[..slash], &after[slash..]),
            None => (after, "/"),
        },
        None => ("", rest),
    };
    let path = decode(path)?;
    if path.contains('\0') {
        return None;
    }
    Some((host.to_owned(), path))
}

fn is_windows(host: &str, path: &str) -> bool {
    let b = path.as_bytes();
    !host.is_empty() || (b.len() >= 3 && b[0] == b'/' && b[1].is_ascii_alphabetic() && b[2] == b':')
}

/// A location's path as the model reads it.
pub fn render_uri(uri: &str, workspace: &str) -> String {
    if !uri.starts_with("file:") {
        return uri.to_owned();
    }
    let Some((host, path)) = file_parts(uri) else {
        return uri.to_owned();
    };
    let windows = is_windows(&host, &path);
    let shown = |p: &str| {
        if windows {
            let p = p
                .strip_prefix('/')
                .filter(|rest| rest.as_bytes().get(1) == Some(&b':'))
                .unwrap_or(p);
            if host.is_empty() {
                p.to_owned()
            } else {
                format!("//{host}{p}")
            }
        } else {
            p.to_owned()
        }
    };
    let Some((ws_host, ws_path)) = file_parts(workspace) else {
        return shown(&path);
    };
    if is_windows(&ws_host, &ws_path) != windows || ws_host != host {
        return shown(&path);
    }
    let root = ws_path.trim_end_matches('/');
    if path == root || path == format!("{root}/") {
        return ".".to_owned();
    }
    match path.strip_prefix(&format!("{root}/")) {
        Some(relative)
            if !relative.is_empty() && !relative.starts_with("../") && relative != ".." =>
        {
            relative.to_owned()
        }
        _ => shown(&path),
    }
}

fn utf16_len(text: &str) -> usize {
    text.encode_utf16().count()
}

/// The longest prefix of `text` of at most `units` UTF-16 units.
fn utf16_prefix(text: &str, units: usize) -> &str {
    let mut used = 0;
    for (index, c) in text.char_indices() {
        if used + c.len_utf16() > units {
            return &text[..index];
        }
        used += c.len_utf16();
    }
    text
}

/// `boundResult`: at most `max` UTF-16 units, ending in the truncation notice when cut.
pub fn bound(text: &str, label: &str, max: usize) -> String {
    if utf16_len(text) <= max {
        return text.to_owned();
    }
    let notice = format!("\n… {label} truncated (limit {max} characters).");
    let notice_len = utf16_len(&notice);
    if notice_len >= max {
        return utf16_prefix(&notice, max).to_owned();
    }
    format!("{}{notice}", utf16_prefix(text, max - notice_len))
}

/// The text of a locations result.
pub fn locations(
    found: &[Location],
    workspace: &str,
    max_locations: usize,
    max_chars: usize,
) -> String {
    if found.is_empty() {
        return "No results.".to_owned();
    }
    let shown = &found[..found.len().min(max_locations)];
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for location in shown {
        let path = render_uri(&location.uri, workspace);
        let entry = format!(
            "{path}:{}:{}",
            location.range.start.line + 1,
            location.range.start.character + 1
        );
        match groups.iter_mut().find(|(p, _)| *p == path) {
            Some((_, entries)) => entries.push(entry),
            None => groups.push((path, vec![entry])),
        }
    }
    let mut lines: Vec<String> = groups
        .into_iter()
        .flat_map(|(_, entries)| entries)
        .collect();
    let omitted = found.len() - shown.len();
    if omitted == 1 {
        lines.push(format!(
            "… 1 more location omitted (limit {max_locations})."
        ));
    } else if omitted > 1 {
        lines.push(format!(
            "… {omitted} more locations omitted (limit {max_locations})."
        ));
    }
    bound(&lines.join("\n"), "locations", max_chars)
}

/// The text of a hover result.
pub fn hover(found: Option<&Hover>, max_chars: usize) -> String {
    match found {
        None => "No hover information.".to_owned(),
        Some(hover) => bound(&hover.contents, "hover", max_chars),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::translate::Position;
    use crate::translate::Range;

    fn at(uri: &str, line: u64, character: u64) -> Location {
        let p = Position { line, character };
        Location {
            uri: uri.to_owned(),
            range: Range { start: p, end: p },
        }
    }

    #[test]
    fn uris_render_relative_absolute_or_verbatim() {
        let ws = "file:///work/ws";
        assert_eq!(render_uri("file:///work/ws/src/a.ts", ws), "src/a.ts");
        assert_eq!(render_uri("file:///work/ws", ws), ".");
        assert_eq!(render_uri("file:///usr/lib/x.d.ts", ws), "/usr/lib/x.d.ts");
        assert_eq!(render_uri("file:///work/ws2/a.ts", ws), "/work/ws2/a.ts");
        assert_eq!(render_uri("untitled:1", ws), "untitled:1");
        assert_eq!(render_uri("file:///work/ws/a%20b.ts", ws), "a b.ts");
        assert_eq!(
            render_uri("file:///work/ws/bad%zz", ws),
            "file:///work/ws/bad%zz"
        );
        assert_eq!(render_uri("file:///C:/proj/a.ts", ws), "C:/proj/a.ts");
        assert_eq!(file_uri("/a b/c"), "file:///a%20b/c");
    }

    #[test]
    fn locations_group_cap_and_bound() {
        let ws = "file:///w";
        let found = [
            at("file:///w/a", 0, 0),
            at("file:///w/b", 1, 1),
            at("file:///w/a", 2, 3),
        ];
        assert_eq!(locations(&found, ws, 100, 16_000), "a:1:1\na:3:4\nb:2:2");
        let capped = locations(&found, ws, 1, 16_000);
        assert!(
            capped.ends_with("… 2 more locations omitted (limit 1)."),
            "{capped}"
        );
        let capped = locations(&found[..2], ws, 1, 16_000);
        assert!(
            capped.ends_with("… 1 more location omitted (limit 1)."),
            "{capped}"
        );
        assert_eq!(locations(&[], ws, 1, 10), "No results.");
        let long: Vec<Location> = (0..50).map(|i| at("file:///w/file.rs", i, 0)).collect();
        let bounded = locations(&long, ws, 100, 100);
        assert_eq!(bounded.encode_utf16().count(), 100);
        assert!(bounded.ends_with("\n… locations truncated (limit 100 characters)."));
        assert_eq!(bound("abcdef", "hover", 3), "\n… ");
        assert_eq!(hover(None, 10), "No hover information.");
    }
}
