//! Output normalisation (conformance README "Comparing output"): workspace path spellings →
//! `{{cwd}}`, UUIDs → `{{sessionId}}`, spill-file paths → `{{spillLocator:NAME}}`, JSON-RPC ids →
//! first-appearance sequence numbers. Applied identically to recorded and observed text so the
//! two compare equal exactly when they differ only in run-specific values.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

/// String normaliser for one run (knows the workspace path and the recorded spill root).
#[derive(Debug, Clone, Default)]
pub struct Normalizer {
    /// Spellings of the workspace path, longest first.
    cwd_spellings: Vec<String>,
}

impl Normalizer {
    pub fn new(workspace: &Path) -> Self {
        let mut spellings = Vec::new();
        let given = workspace.to_string_lossy().trim_end_matches('/').to_owned();
        spellings.push(given.clone());
        if let Ok(real) = std::fs::canonicalize(workspace) {
            spellings.push(real.to_string_lossy().trim_end_matches('/').to_owned());
        }
        for s in spellings.clone() {
            if s.starts_with('/') && !s.starts_with("/private/") {
                spellings.push(format!("/private{s}"));
            }
        }
        spellings.retain(|s| !s.is_empty() && s != "/");
        spellings.sort_by_key(|s| std::cmp::Reverse(s.len()));
        spellings.dedup();
        Self {
            cwd_spellings: spellings,
        }
    }

    /// Normalises one string value.
    pub fn text(&self, s: &str) -> String {
        let mut out = s.to_owned();
        for spelling in &self.cwd_spellings {
            out = replace_at_path_boundary(&out, spelling, "{{cwd}}");
        }
        out = slashes_after_cwd(&out);
        out = replace_spill_paths(&out);
        replace_uuids(&out)
    }

    /// Normalises every string inside a JSON value (keys are left alone).
    pub fn value(&self, v: &Value) -> Value {
        match v {
            Value::String(s) => Value::String(self.text(s)),
            Value::Array(items) => Value::Array(items.iter().map(|i| self.value(i)).collect()),
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), self.value(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

/// Renumbers JSON-RPC `id`s of a message sequence by first appearance (1-based).
#[derive(Debug, Default)]
pub struct IdRenumberer {
    seen: HashMap<String, u64>,
}

impl IdRenumberer {
    pub fn apply(&mut self, msg: &mut Value) {
        if let Some(id) = msg.get_mut("id") {
            let key = id.to_string();
            let next = self.seen.len() as u64 + 1;
            let n = *self.seen.entry(key).or_insert(next);
            *id = Value::from(n);
        }
    }
}

/// Normalises a whole ACP stdout capture (README step 1–3); returns compact lines.
pub fn normalize_acp_lines(norm: &Normalizer, lines: &[Value]) -> Vec<String> {
    let mut ids = IdRenumberer::default();
    lines
        .iter()
        .map(|line| {
            let mut v = norm.value(line);
            ids.apply(&mut v);
            v.to_string()
        })
        .collect()
}

fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '.' | '_' | '-')
}

fn replace_at_path_boundary(s: &str, needle: &str, with: &str) -> String {
    if needle.is_empty() || !s.contains(needle) {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(pos) = rest.find(needle) {
        let before = if pos > 0 {
            rest[..pos].chars().last()
        } else {
            out.chars().last()
        };
        let after = rest[pos + needle.len()..].chars().next();
        let boundary_before = before.is_none_or(|c| !is_name_char(c) && c != '/');
        let boundary_after = after.is_none_or(|c| !is_name_char(c));
        out.push_str(&rest[..pos]);
        if boundary_before && boundary_after {
            out.push_str(with);
        } else {
            out.push_str(needle);
        }
        rest = &rest[pos + needle.len()..];
    }
    out.push_str(rest);
    out
}

fn slashes_after_cwd(s: &str) -> String {
    const CWD: &str = "{{cwd}}";
    if !s.contains(CWD) || !s.contains('\\') {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(pos) = rest.find(CWD) {
        out.push_str(&rest[..pos + CWD.len()]);
        rest = &rest[pos + CWD.len()..];
        let end = rest
            .find(|c: char| c.is_whitespace() || c == '"' || c == '\'')
            .unwrap_or(rest.len());
        out.push_str(&rest[..end].replace('\\', "/"));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

fn is_hex_run(s: &str, n: usize) -> bool {
    s.len() >= n && s.as_bytes()[..n].iter().all(u8::is_ascii_hexdigit)
}

/// `<root>/session-<12 hex>/<12 hex>-NAME` → `{{spillLocator:NAME}}`, whatever the root.
fn replace_spill_paths(s: &str) -> String {
    const MARK: &str = "/session-";
    if !s.contains(MARK) {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(pos) = rest.find(MARK) {
        let tail = &rest[pos + MARK.len()..];
        let shaped = is_hex_run(tail, 12)
            && tail.as_bytes().get(12) == Some(&b'/')
            && is_hex_run(&tail[13..], 12)
            && tail.as_bytes().get(25) == Some(&b'-');
        if !shaped {
            out.push_str(&rest[..pos + MARK.len()]);
            rest = &rest[pos + MARK.len()..];
            continue;
        }
        let name_start = 26;
        let mut name_end = tail[name_start..]
            .find(|c: char| !is_name_char(c))
            .map_or(tail.len(), |n| name_start + n);
        while name_end > name_start && tail.as_bytes()[name_end - 1] == b'.' {
            name_end -= 1;
        }
        let root_start = rest[..pos]
            .rfind(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '(' | '<' | '>' | '`'))
            .map_or(0, |p| {
                p + rest[p..].chars().next().map_or(1, char::len_utf8)
            });
        out.push_str(&rest[..root_start]);
        out.push_str("{{spillLocator:");
        out.push_str(&tail[name_start..name_end]);
        out.push_str("}}");
        rest = &tail[name_end..];
    }
    out.push_str(rest);
    out
}

fn uuid_at(b: &[u8], i: usize) -> bool {
    const GROUPS: [usize; 5] = [8, 4, 4, 4, 12];
    let mut p = i;
    for (g, len) in GROUPS.iter().enumerate() {
        if g > 0 {
            if b.get(p) != Some(&b'-') {
                return false;
            }
            p += 1;
        }
        if p + len > b.len() || !b[p..p + len].iter().all(u8::is_ascii_hexdigit) {
            return false;
        }
        p += len;
    }
    true
}

fn replace_uuids(s: &str) -> String {
    const UUID_LEN: usize = 36;
    let b = s.as_bytes();
    if b.len() < UUID_LEN {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len());
    let mut copied = 0;
    let mut i = 0;
    while i + UUID_LEN <= b.len() {
        if b[i].is_ascii_hexdigit() && uuid_at(b, i) {
            out.push_str(&s[copied..i]);
            out.push_str("{{sessionId}}");
            i += UUID_LEN;
            copied = i;
        } else {
            i += 1;
        }
    }
    out.push_str(&s[copied..]);
    out
}

#[cfg(test)]
#[path = "normalize_tests.rs"]
mod tests;
