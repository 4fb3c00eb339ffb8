//! Credentials taken out of dsh's own environment at start-up. The binary moves every
//! credential-like variable (the provider key among them) from its process environment into
//! this private store before any thread starts, so the key is not in `/proc/<dsh>/environ`
//! for a command to read (and dsh's children never got those variables anyway). The code that
//! needs one reads it through [`var`].

use std::collections::BTreeMap;
use std::sync::OnceLock;

use crate::env::is_secret_name;
use crate::registry::register_secret;

fn taken() -> &'static OnceLock<BTreeMap<String, String>> {
    static TAKEN: OnceLock<BTreeMap<String, String>> = OnceLock::new();
    &TAKEN
}

/// The variables of this process's environment that [`is_secret_name`] calls credentials
/// (valid UTF-8 only: a child never inherits anything else either).
pub fn credential_vars() -> Vec<(String, String)> {
    std::env::vars_os()
        .filter_map(|(name, value)| {
            let name = name.into_string().ok()?;
            let value = value.into_string().ok()?;
            is_secret_name(&name).then_some((name, value))
        })
        .collect()
}

/// Keeps `vars` (just removed from the process environment) for [`var`], and registers each
/// value as a secret, so it is redacted wherever a tool finds it again (another process that
/// inherited the same variable). Values that are absolute paths (`SSH_AUTH_SOCK`) name where a
/// secret is, not the secret, and are not registered. The first call wins.
pub fn keep_taken(vars: Vec<(String, String)>) {
    for (_, value) in &vars {
        if !value.starts_with('/') {
            register_secret(value.clone());
        }
    }
    let _ = taken().set(vars.into_iter().collect());
}

/// The environment variable `name`: from the process environment, else from what start-up
/// took out of it. Use it for anything credential-like (`DEEPSEEK_API_KEY`, a search
/// provider's key).
pub fn var(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .or_else(|| taken().get()?.get(name).cloned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taken_variables_stay_readable_and_are_secrets() {
        keep_taken(vec![
            (
                "DSH_TEST_TAKEN_KEY".to_owned(),
                "sk-taken-0123456789".to_owned(),
            ),
            (
                "DSH_TEST_AUTH_SOCK".to_owned(),
                "/run/agent.sock".to_owned(),
            ),
        ]);
        assert_eq!(
            var("DSH_TEST_TAKEN_KEY").as_deref(),
            Some("sk-taken-0123456789")
        );
        assert!(crate::holds_secret("x sk-taken-0123456789 y"));
        assert!(!crate::holds_secret("/run/agent.sock"));
        assert_eq!(var("DSH_TEST_NOT_SET_ANYWHERE"), None);
        assert!(var("PATH").is_some());
    }
}
