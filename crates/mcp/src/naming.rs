//! Public tool names: `mcp__<server>__<tool>`, made model-safe (catalog §4 "Naming").

use sha2::Digest;
use sha2::Sha256;

/// The longest public name left as is.
const MAX_LEN: usize = 64;
/// Length of the sanitised prefix kept in front of the hash suffix.
const PREFIX_LEN: usize = 51;

fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// `mcp__<server>__<raw>`, or, when that has characters outside `[A-Za-z0-9_-]` or is longer
/// than 64, the sanitised name cut to 51 characters plus `_` plus the first 12 hex digits of
/// sha256(`server\0raw`). A pure function of its inputs, so names survive reconnects.
pub fn public_name(server: &str, raw: &str) -> String {
    let name = format!("mcp__{server}__{raw}");
    // Length as upstream (JavaScript) counts it: UTF-16 code units.
    let units: usize = name.chars().map(char::len_utf16).sum();
    if units <= MAX_LEN && name.chars().all(allowed) {
        return name;
    }
    // A non-`u` JavaScript regex replaces each UTF-16 code unit, so a character outside the
    // BMP becomes two underscores.
    let mut sanitised = String::with_capacity(name.len());
    for c in name.chars() {
        if allowed(c) {
            sanitised.push(c);
        } else {
            sanitised.extend(std::iter::repeat_n('_', c.len_utf16()));
        }
    }
    sanitised.truncate(PREFIX_LEN);
    let digest = Sha256::digest(format!("{server}\0{raw}").as_bytes());
    let hex: String = digest
        .iter()
        .take(6)
        .map(|byte| format!("{byte:02x}"))
        .collect();
    format!("{sanitised}_{hex}")
}

/// The slash command of an MCP prompt: `mcp__<server>__<prompt>`, lower-cased, every character
/// outside `[a-z0-9_-]` replaced by `_` (command names must match `^[a-z][a-z0-9_-]*$`).
pub fn prompt_command(server: &str, prompt: &str) -> String {
    format!("mcp__{server}__{prompt}")
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn valid_short_names_pass_through() {
        assert_eq!(public_name("everything", "echo"), "mcp__everything__echo");
        assert_eq!(public_name("e", "get-tiny-image"), "mcp__e__get-tiny-image");
    }

    #[test]
    fn invalid_characters_and_long_names_get_a_hash_suffix() {
        let dotted = public_name("srv", "files.read");
        let digest = Sha256::digest(b"srv\0files.read");
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        let hash = &hex[..12];
        assert_eq!(dotted, format!("mcp__srv__files_read_{hash}"));

        let long_raw = "a".repeat(60);
        let long = public_name("srv", &long_raw);
        assert_eq!(long.len(), 51 + 1 + 12);
        assert!(long.starts_with("mcp__srv__aaaa"));
        assert_ne!(
            public_name("srv", &"a".repeat(61)),
            long,
            "hash tells them apart"
        );

        let exactly_64 = format!("mcp__s__{}", "b".repeat(56));
        assert_eq!(public_name("s", &"b".repeat(56)), exactly_64);
    }

    #[test]
    fn astral_characters_count_as_two_units() {
        let name = public_name("s", "x😀");
        assert!(name.starts_with("mcp__s__x___"), "{name}");
        assert_eq!(name, public_name("s", "x😀"), "deterministic");
    }
}
