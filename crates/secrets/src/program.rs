//! Finding the program a child runs. A name is looked up in the *child's* filtered `PATH`
//! (never the parent's), and the result is absolute: the standard library spawns an absolute
//! program with `posix_spawn`, while a bare name with a replaced environment makes it fall back
//! to `fork` + `exec`, which copies the whole parent's page tables on every call.

use std::path::Path;
use std::path::PathBuf;

/// `program` as an absolute path: kept as is when it already contains a `/` (relative ones
/// are joined onto `cwd`), else the first executable regular file of that name in `path_var`.
pub fn resolve_program(program: &str, path_var: Option<&str>, cwd: &Path) -> Option<PathBuf> {
    if program.contains('/') {
        let path = Path::new(program);
        return Some(if path.is_absolute() {
            path.to_path_buf()
        } else {
            cwd.join(path)
        });
    }
    let path_var = path_var.unwrap_or("/usr/local/bin:/usr/bin:/bin");
    std::env::split_paths(path_var)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_in_the_given_path_only() {
        let bash = resolve_program("bash", Some("/nonexistent:/usr/bin:/bin"), Path::new("/"))
            .expect("bash on this host");
        assert!(bash.is_absolute() && bash.ends_with("bash"));
        assert_eq!(
            resolve_program("bash", Some("/nonexistent"), Path::new("/")),
            None
        );
        assert_eq!(
            resolve_program("./x", None, Path::new("/w")),
            Some(PathBuf::from("/w/./x"))
        );
        assert_eq!(
            resolve_program("/bin/sh", None, Path::new("/w")),
            Some(PathBuf::from("/bin/sh"))
        );
    }
}
