//! The command-line grammar: `^/([a-z][a-z0-9_-]*)(?=$|[\t\n\r ])` at byte 0.

/// A line that names a command: `name` and everything after it (`raw_input`, separator
/// included, so `"/goal  x"` has raw input `"  x"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParsedCommand<'a> {
    pub name: &'a str,
    pub raw_input: &'a str,
}

impl ParsedCommand<'_> {
    /// The argument text without the separator and surrounding whitespace.
    pub fn argument(&self) -> &str {
        self.raw_input.trim()
    }
}

fn is_name_start(b: u8) -> bool {
    b.is_ascii_lowercase()
}

fn is_name_char(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-'
}

/// Whether `name` is a valid command name (`^[a-z][a-z0-9_-]*$`).
pub fn is_valid_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    bytes.first().is_some_and(|b| is_name_start(*b)) && bytes.iter().all(|b| is_name_char(*b))
}

/// The command a line names, if it is one. Upper-case names, a name glued to other text
/// (`/a.b`), or a missing name are not commands.
pub fn parse_command(line: &str) -> Option<ParsedCommand<'_>> {
    let rest = line.strip_prefix('/')?;
    let bytes = rest.as_bytes();
    if !bytes.first().is_some_and(|b| is_name_start(*b)) {
        return None;
    }
    let end = bytes
        .iter()
        .position(|b| !is_name_char(*b))
        .unwrap_or(bytes.len());
    match bytes.get(end) {
        None | Some(b'\t' | b'\n' | b'\r' | b' ') => Some(ParsedCommand {
            name: &rest[..end],
            raw_input: &rest[end..],
        }),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grammar_of_a_command_line() {
        let parsed = parse_command("/goal  ship it").unwrap();
        assert_eq!(parsed.name, "goal");
        assert_eq!(parsed.raw_input, "  ship it");
        assert_eq!(parsed.argument(), "ship it");
        assert_eq!(parse_command("/compact").unwrap().raw_input, "");
        assert_eq!(parse_command("/plan\toff").unwrap().raw_input, "\toff");
        assert_eq!(parse_command("/mcp__srv__p x").unwrap().name, "mcp__srv__p");
        for not in [
            "/Goal", "goal", " /goal", "/", "/1a", "/a.b", "/a/b", "//x", "/é",
        ] {
            assert_eq!(parse_command(not), None, "{not:?}");
        }
    }

    #[test]
    fn names() {
        assert!(is_valid_name("a-b_c9"));
        assert!(!is_valid_name(""));
        assert!(!is_valid_name("9a"));
        assert!(!is_valid_name("A"));
        assert!(!is_valid_name("a b"));
    }
}
