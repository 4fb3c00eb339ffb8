//! The environment a child process may inherit.
//!
//! The rule is a superset of upstream's `/KEY|PASSWORD|SECRET|TOKEN/i` scrub: names that look
//! like credentials (including agent sockets a child could authenticate through), dsh's own
//! `DSH_*` settings, values that carry a registered secret, and URLs with an embedded password
//! are all dropped. Variables that are not valid UTF-8 are dropped too (a child environment is
//! built from text).

use crate::registry::holds_secret;

/// Words that mark a variable name as a credential, matched anywhere in the upper-cased name.
const SECRET_WORDS: [&str; 7] = [
    "KEY",
    "TOKEN",
    "SECRET",
    "PASS",
    "CREDENTIAL",
    "COOKIE",
    "PRIVATE",
];

/// Whether a variable of this name is treated as a credential.
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    if SECRET_WORDS.iter().any(|word| upper.contains(word)) {
        return true;
    }
    // `SSH_AUTH_SOCK`, `*_AUTH`, `AUTHORIZATION`…, but not git's author identity.
    if upper.contains("AUTH") && !upper.starts_with("GIT_AUTHOR_") {
        return true;
    }
    upper.ends_with("_PWD") || upper == "GPG_AGENT_INFO"
}

/// Whether a variable of this name may be inherited: not a credential, not a `DSH_*` setting
/// (the managed `DSH_*` snapshot a tool sets is applied after filtering).
pub fn inheritable(name: &str) -> bool {
    !is_secret_name(name) && !name.starts_with("DSH_")
}

/// `scheme://user:password@host…`
fn url_with_password(value: &str) -> bool {
    let Some(start) = value.find("://") else {
        return false;
    };
    let rest = &value[start + 3..];
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    authority
        .rsplit_once('@')
        .is_some_and(|(userinfo, _)| userinfo.contains(':'))
}

/// The variables of `vars` a child may inherit, in their original order.
pub fn filter_env(vars: impl IntoIterator<Item = (String, String)>) -> Vec<(String, String)> {
    vars.into_iter()
        .filter(|(name, value)| {
            inheritable(name) && !holds_secret(value) && !url_with_password(value)
        })
        .collect()
}

/// This process's environment, filtered for a child.
pub fn parent_env() -> Vec<(String, String)> {
    filter_env(
        std::env::vars_os().filter_map(|(name, value)| {
            Some((name.into_string().ok()?, value.into_string().ok()?))
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn credentials_and_dsh_settings_are_dropped() {
        let kept = filter_env(pairs(&[
            ("PATH", "/bin"),
            ("HOME", "/root"),
            ("PWD", "/w"),
            ("OLDPWD", "/"),
            ("GIT_AUTHOR_NAME", "Ada"),
            ("LANG", "C.UTF-8"),
            ("DEEPSEEK_API_KEY", "sk-1"),
            ("github_token", "x"),
            ("DB_PASSWORD", "x"),
            ("MYSQL_PWD", "x"),
            ("SMTP_PASS", "x"),
            ("MY_SECRET", "x"),
            ("SSH_AUTH_SOCK", "/run/ssh.sock"),
            ("GPG_AGENT_INFO", "x"),
            ("AWS_SESSION_TOKEN", "x"),
            ("GOOGLE_APPLICATION_CREDENTIALS", "/k.json"),
            ("NPM_CONFIG__AUTH", "x"),
            ("DSH_HOME", "/h"),
            ("DATABASE_URL", "postgres://app:hunter2@db:5432/app"),
            ("MIRROR_URL", "https://mirror.example/pypi"),
            ("AT_URL", "https://user@example.com/x"),
        ]));
        let names: Vec<&str> = kept.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            names,
            [
                "PATH",
                "HOME",
                "PWD",
                "OLDPWD",
                "GIT_AUTHOR_NAME",
                "LANG",
                "MIRROR_URL",
                "AT_URL"
            ]
        );
    }

    #[test]
    fn a_registered_secret_value_is_dropped_under_any_name() {
        crate::register_secret("sk-env-filter-test-98765");
        let kept = filter_env(pairs(&[
            ("INNOCENT", "prefix sk-env-filter-test-98765"),
            ("OTHER", "fine"),
        ]));
        assert_eq!(kept, pairs(&[("OTHER", "fine")]));
    }
}
