//! The one way dsh builds a child's command. A child's environment starts from dsh's own
//! through `dsh-secrets`' filter (credential-like names, registered secret values, URL
//! passwords, agent sockets and `DSH_*` settings dropped), read with `vars_os` so a variable
//! that is not UTF-8 is dropped rather than a panic; a caller's overlay (managed `DSH_*`
//! facts, a server's configured variables, which is how an intended key reaches a child) is
//! applied after the filter. The command starts with exactly that environment.

use std::ffi::OsStr;
use std::path::Path;
use std::path::PathBuf;

/// The environment of one child: a filtered base, then the caller's overlay.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChildEnv {
    vars: Vec<(String, String)>,
}

impl ChildEnv {
    /// This process's environment through the one filter.
    pub fn inherited() -> Self {
        Self {
            vars: dsh_secrets::parent_env(),
        }
    }

    /// `base` through the one filter (a caller-chosen base: a session's recorded
    /// environment, or a test's).
    pub fn filtered(base: impl IntoIterator<Item = (String, String)>) -> Self {
        Self {
            vars: dsh_secrets::filter_env(base),
        }
    }

    /// Sets `name` (replacing an inherited value), unfiltered: the caller means it.
    pub fn set(&mut self, name: impl Into<String>, value: impl Into<String>) -> &mut Self {
        let name = name.into();
        self.vars.retain(|(existing, _)| *existing != name);
        self.vars.push((name, value.into()));
        self
    }

    /// Every pair of `overlay` set in order.
    pub fn with<K: Into<String>, V: Into<String>>(
        mut self,
        overlay: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        for (name, value) in overlay {
            self.set(name, value);
        }
        self
    }

    /// The value of `name`, if the child gets it.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars
            .iter()
            .find(|(existing, _)| existing == name)
            .map(|(_, value)| value.as_str())
    }

    pub fn vars(&self) -> &[(String, String)] {
        &self.vars
    }

    pub fn into_vars(self) -> Vec<(String, String)> {
        self.vars
    }

    /// `program` as an absolute path, looked up in this environment's `PATH` (never dsh's):
    /// see [`dsh_secrets::resolve_program`].
    pub fn resolve(&self, program: &str, cwd: &Path) -> Option<PathBuf> {
        dsh_secrets::resolve_program(program, self.get("PATH"), cwd)
    }
}

/// A `tokio` command for `program` that starts with exactly `env`.
pub fn command(program: impl AsRef<OsStr>, env: &ChildEnv) -> tokio::process::Command {
    #[allow(
        clippy::disallowed_methods,
        reason = "the one place a tokio child is built"
    )]
    let mut command = tokio::process::Command::new(program);
    command
        .env_clear()
        .envs(env.vars.iter().map(|(k, v)| (k, v)));
    command
}

/// A blocking `std` command for `program` that starts with exactly `env`.
pub fn std_command(program: impl AsRef<OsStr>, env: &ChildEnv) -> std::process::Command {
    #[allow(
        clippy::disallowed_methods,
        reason = "the one place a std child is built"
    )]
    let mut command = std::process::Command::new(program);
    command
        .env_clear()
        .envs(env.vars.iter().map(|(k, v)| (k, v)));
    command
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn the_base_is_filtered_and_the_overlay_is_not() {
        let env = ChildEnv::filtered(pairs(&[
            ("PATH", "/bin"),
            ("GITHUB_TOKEN", "t"),
            ("SSH_AUTH_SOCK", "/s"),
            ("DATABASE_URL", "postgres://a:pw@db/x"),
            ("DSH_HOME", "/h"),
        ]))
        .with([("DEEPSEEK_API_KEY", "intended"), ("PATH", "/usr/bin")]);
        assert_eq!(
            env.vars(),
            pairs(&[("DEEPSEEK_API_KEY", "intended"), ("PATH", "/usr/bin")])
        );
        assert_eq!(env.get("PATH"), Some("/usr/bin"));
    }

    #[tokio::test]
    async fn a_command_starts_with_exactly_its_environment() {
        let env = ChildEnv::filtered(pairs(&[("PATH", "/usr/bin:/bin"), ("ONLY", "1")]));
        let sh = env.resolve("sh", Path::new("/")).unwrap();
        let out = command(&sh, &env)
            .arg("-c")
            .arg("env")
            .output()
            .await
            .unwrap();
        let mut names: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|line| line.split_once('=').map(|(k, _)| k.to_owned()))
            .filter(|name| !["PWD", "SHLVL", "_"].contains(&name.as_str()))
            .collect();
        names.sort();
        assert_eq!(names, ["ONLY", "PATH"]);
        let out = std_command(&sh, &env)
            .arg("-c")
            .arg("echo $ONLY")
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "1\n");
    }
}
