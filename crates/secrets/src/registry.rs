//! Secret values known to this process (the provider key, credentials a plugin resolved).
//! Anything that carries one of them is dropped from a child environment and redacted from a
//! tool result.

use std::sync::OnceLock;
use std::sync::RwLock;

/// What a redacted secret is replaced with.
pub const REDACTED: &str = "[redacted secret]";

/// Values this short are too likely to occur by chance to be matched anywhere.
const MIN_SECRET_LEN: usize = 8;

fn registry() -> &'static RwLock<Vec<String>> {
    static SECRETS: OnceLock<RwLock<Vec<String>>> = OnceLock::new();
    SECRETS.get_or_init(|| RwLock::new(Vec::new()))
}

/// Remembers `value` as a secret for the rest of the process. Blank and very short values are
/// ignored (they would match ordinary text).
pub fn register_secret(value: impl Into<String>) {
    let value = value.into();
    let trimmed = value.trim();
    if trimmed.len() < MIN_SECRET_LEN {
        return;
    }
    let trimmed = trimmed.to_owned();
    let mut secrets = dsh_sync::write(registry());
    if !secrets.contains(&trimmed) {
        secrets.push(trimmed);
    }
}

/// Whether `text` contains a registered secret.
pub fn holds_secret(text: &str) -> bool {
    let secrets = dsh_sync::read(registry());
    secrets.iter().any(|secret| text.contains(secret.as_str()))
}

/// `text` with every registered secret replaced by [`REDACTED`]; `None` when nothing matched
/// (the common case costs no allocation).
pub fn redact(text: &str) -> Option<String> {
    let secrets = dsh_sync::read(registry());
    if !secrets.iter().any(|secret| text.contains(secret.as_str())) {
        return None;
    }
    let mut out = text.to_owned();
    for secret in secrets.iter() {
        if out.contains(secret.as_str()) {
            out = out.replace(secret.as_str(), REDACTED);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_values_are_found_and_redacted() {
        register_secret("sk-registry-test-0123456789");
        register_secret("short");
        assert!(holds_secret("Bearer sk-registry-test-0123456789!"));
        assert!(!holds_secret("short and sweet"));
        assert_eq!(
            redact("key=sk-registry-test-0123456789;").as_deref(),
            Some("key=[redacted secret];")
        );
        assert_eq!(redact("nothing here"), None);
    }
}
