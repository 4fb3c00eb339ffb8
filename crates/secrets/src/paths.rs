//! Files and folders that hold credentials by convention. The file tools refuse to read them
//! and the sandbox hides them from confined commands; dsh's own home is added by the callers
//! (they know where it is).

use std::path::Path;
use std::path::PathBuf;

/// Relative to the user's home folder.
const HOME_SECRETS: [&str; 20] = [
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".kube",
    ".docker",
    ".password-store",
    ".config/gcloud",
    ".config/gh",
    ".config/hub",
    ".local/share/keyrings",
    ".netrc",
    ".git-credentials",
    ".pgpass",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".terraform.d/credentials.tfrc.json",
    ".vault-token",
];

/// The conventional credential locations under `home` (which need not exist).
pub fn secret_paths(home: &Path) -> Vec<PathBuf> {
    HOME_SECRETS.iter().map(|rel| home.join(rel)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_under_home() {
        let paths = secret_paths(Path::new("/home/ada"));
        assert!(paths.contains(&PathBuf::from("/home/ada/.ssh")));
        assert!(paths.iter().all(|p| p.starts_with("/home/ada")));
    }
}
