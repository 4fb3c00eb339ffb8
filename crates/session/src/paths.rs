//! File layout of the JSONL backend (§5.2):
//! `<root>/--<projectKey(cwd)>--/<encodeSegment(id)>/session.jsonl`.

use crate::error::SessionError;

/// The log file name inside a session directory (uncompressed encoding).
pub const LOG_FILE_NAME: &str = "session.jsonl";

/// Directory name used for sessions without a cwd.
pub const NO_CWD_DIR: &str = "_no-cwd";

fn is_safe(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

fn escape(c: char, out: &mut String) {
    let mut units = [0u16; 2];
    for unit in c.encode_utf16(&mut units) {
        out.push_str(&format!("~{unit:04X}"));
    }
}

/// `encodeSegment`: keeps `[A-Za-z0-9._-]`, escapes every other UTF-16 unit as `~XXXX`;
/// `.` and `..` are escaped whole so a segment never names a parent directory.
pub fn encode_segment(id: &str) -> Result<String, SessionError> {
    match id {
        "" => Err(SessionError::InvalidInput {
            field: "session id",
            reason: "must not be empty".into(),
        }),
        "." => Ok("~002E".into()),
        ".." => Ok("~002E~002E".into()),
        _ => {
            let mut out = String::with_capacity(id.len());
            for c in id.chars() {
                if is_safe(c) {
                    out.push(c);
                } else {
                    escape(c, &mut out);
                }
            }
            Ok(out)
        }
    }
}

/// The project directory name for `cwd`: `--<slug>--`, where separator runs (`/`, `\`, `:`)
/// become one `-`, safe characters stay, others become `~XXXX`, leading `-` are stripped
/// (empty → `root`) and the slug is cut to 251 characters. `_no-cwd` without a cwd.
pub fn project_dir_name(cwd: Option<&str>) -> String {
    let Some(cwd) = cwd else {
        return NO_CWD_DIR.to_owned();
    };
    let mut slug = String::with_capacity(cwd.len());
    let mut in_separator = false;
    for c in cwd.chars() {
        if matches!(c, '/' | '\\' | ':') {
            if !in_separator {
                slug.push('-');
            }
            in_separator = true;
            continue;
        }
        in_separator = false;
        if is_safe(c) {
            slug.push(c);
        } else {
            escape(c, &mut slug);
        }
    }
    let mut slug = slug.trim_start_matches('-').to_owned();
    if slug.is_empty() {
        slug.push_str("root");
    }
    // The slug is ASCII, so byte truncation is character truncation.
    slug.truncate(251);
    format!("--{slug}--")
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn segments_escape_unsafe_units() {
        assert_eq!(encode_segment("session-1a_b.c").unwrap(), "session-1a_b.c");
        assert_eq!(encode_segment("a/b~c").unwrap(), "a~002Fb~007Ec");
        assert_eq!(encode_segment("é😀").unwrap(), "~00E9~D83D~DE00");
        assert_eq!(encode_segment(".").unwrap(), "~002E");
        assert_eq!(encode_segment("..").unwrap(), "~002E~002E");
        assert!(encode_segment("").is_err());
    }

    #[test]
    fn project_keys_follow_the_cwd() {
        assert_eq!(project_dir_name(Some("/work/main")), "--work-main--");
        assert_eq!(
            project_dir_name(Some("C:\\Users\\me//x")),
            "--C-Users-me-x--"
        );
        assert_eq!(project_dir_name(Some("/")), "--root--");
        assert_eq!(project_dir_name(Some("/a b")), "--a~0020b--");
        assert_eq!(project_dir_name(None), "_no-cwd");
        let long = format!("/{}", "x".repeat(400));
        assert_eq!(project_dir_name(Some(&long)).len(), 255);
    }
}
