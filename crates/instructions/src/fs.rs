//! The filesystem seam. The plugin reads only through an [`InstructionFs`] the composition
//! provides (the same roots the file tools may read); without one it does nothing.

use std::io::Read;
use std::path::Path;
use std::time::SystemTime;

/// What identifies one version of a file without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileVersion {
    pub len: u64,
    pub modified: Option<SystemTime>,
    pub inode: u64,
}

/// A candidate probe (final symlink followed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// Missing, a directory, or a link to one.
    Absent,
    Present(FileVersion),
    /// The provider failed to answer.
    Unavailable(String),
}

/// A bounded read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadOutcome {
    Text(String),
    /// Larger than the cap (known size or streamed count).
    TooLarge,
    Failed(String),
}

/// The provider the plugin reads through.
pub trait InstructionFs: Send + Sync {
    /// Whether anything exists at `path` (a project-root marker of any type).
    fn exists(&self, path: &Path) -> std::io::Result<bool>;
    /// A regular file at `path`, following a final symlink.
    fn probe_file(&self, path: &Path) -> Probe;
    /// UTF-8 text of `path`, at most `max` bytes.
    fn read(&self, path: &Path, max: u64) -> ReadOutcome;
}

/// The local filesystem.
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalFs;

fn version(meta: &std::fs::Metadata) -> FileVersion {
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(meta);
    #[cfg(not(unix))]
    let inode = 0;
    FileVersion {
        len: meta.len(),
        modified: meta.modified().ok(),
        inode,
    }
}

impl InstructionFs for LocalFs {
    fn exists(&self, path: &Path) -> std::io::Result<bool> {
        match std::fs::symlink_metadata(path) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn probe_file(&self, path: &Path) -> Probe {
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_file() => Probe::Present(version(&meta)),
            Ok(_) => Probe::Absent,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) =>
            {
                Probe::Absent
            }
            Err(e) => Probe::Unavailable(e.to_string()),
        }
    }

    fn read(&self, path: &Path, max: u64) -> ReadOutcome {
        let file = match std::fs::File::open(path) {
            Ok(file) => file,
            Err(e) => return ReadOutcome::Failed(e.to_string()),
        };
        if file.metadata().is_ok_and(|m| m.len() > max) {
            return ReadOutcome::TooLarge;
        }
        let mut bytes = Vec::new();
        if let Err(e) = file.take(max + 1).read_to_end(&mut bytes) {
            return ReadOutcome::Failed(e.to_string());
        }
        if bytes.len() as u64 > max {
            return ReadOutcome::TooLarge;
        }
        ReadOutcome::Text(String::from_utf8_lossy(&bytes).into_owned())
    }
}

/// Lowercase hex SHA-1.
pub fn sha1_hex(text: &str) -> String {
    use sha1::Digest;
    let digest = sha1::Sha1::digest(text.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_probes_follow_links_and_reads_are_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("AGENTS.canonical.md");
        std::fs::write(&file, "Root snapshot instruction.\n").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink("AGENTS.canonical.md", dir.path().join("AGENTS.md")).unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink("sub", dir.path().join("LINKDIR.md")).unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let fs = LocalFs;
        assert!(matches!(
            fs.probe_file(&dir.path().join("AGENTS.md")),
            Probe::Present(_)
        ));
        assert_eq!(fs.probe_file(&dir.path().join("sub")), Probe::Absent);
        assert_eq!(fs.probe_file(&dir.path().join("LINKDIR.md")), Probe::Absent);
        assert_eq!(fs.probe_file(&dir.path().join("missing")), Probe::Absent);
        assert_eq!(
            fs.read(&dir.path().join("AGENTS.md"), 100),
            ReadOutcome::Text("Root snapshot instruction.\n".into())
        );
        assert_eq!(fs.read(&file, 5), ReadOutcome::TooLarge);
        assert!(matches!(
            fs.read(&dir.path().join("missing"), 5),
            ReadOutcome::Failed(_)
        ));
        assert!(fs.exists(&dir.path().join("sub")).unwrap());
        assert!(!fs.exists(&dir.path().join("nope")).unwrap());
    }

    #[test]
    fn digests_match_the_recorded_scenario() {
        assert_eq!(
            sha1_hex("Root snapshot instruction.\n"),
            "2e18766c26603608f321508caae00ea8f4434d59"
        );
        assert_eq!(
            sha1_hex("Nested snapshot instruction.\n"),
            "c446df9a85c7e73a3055f394a4822a19ac9ead5a"
        );
    }
}
