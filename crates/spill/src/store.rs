//! Spill storage (upstream's `dsh-spill-local` layout) and the inline preview text (§6).
//!
//! A session with a folder of its own (a stored session) spills into `<session folder>/spill/`,
//! so its spill files live and go with it; any other session spills into
//! `<root>/session-<first 12 hex of sha256(sessionId)>/`. Files are
//! `<12 random hex>-<name>`, directories are 0700 and files are created exclusively with mode
//! 0600, so no other user reads them.
//!
//! Retention: a session's spill folder keeps at most [`SESSION_SPILL_BUDGET`] bytes; creating a
//! file beyond that deletes the session's oldest spill files first. An executor spill that
//! outgrew its cap is deleted at once. The default root (a per-process folder under the OS temp
//! directory) is removed when its owner is disposed, and folders left by processes that are
//! gone are removed when a new default root is made.

use std::collections::HashMap;
use std::fs::DirBuilder;
use std::fs::File;
use std::fs::OpenOptions;
use std::io;
use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;

use rand::RngExt;
use sha2::Digest;
use sha2::Sha256;

/// The retrieval hint appended to every spill notice.
pub const RETRIEVAL_HINT: &str =
    "Use read with offset/limit, or grep this path to search within it.";

/// Bytes a session's spill folder may hold before its oldest files are deleted.
pub const SESSION_SPILL_BUDGET: u64 = 256 * 1024 * 1024;

/// Where spill files go.
#[derive(Debug, Clone)]
pub struct SpillStore {
    root: PathBuf,
    /// Sessions that spill into their own folder.
    placed: Arc<Mutex<HashMap<String, PathBuf>>>,
    budget: u64,
}

/// A saved spill file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpillSaved {
    pub locator: String,
    pub bytes: u64,
    pub retrieval_hint: String,
}

impl SpillStore {
    /// A store rooted at `root` (created 0700 on first use).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            placed: Arc::default(),
            budget: SESSION_SPILL_BUDGET,
        }
    }

    /// The default root: a per-process private directory under the OS temp directory. Folders
    /// of earlier processes that are gone are removed first.
    pub fn in_temp_dir() -> Self {
        remove_orphaned_roots(&std::env::temp_dir());
        Self::new(std::env::temp_dir().join(format!("dsh-spill-{}", std::process::id())))
    }

    /// The same store with another per-session budget (tests).
    pub fn with_budget(mut self, bytes: u64) -> Self {
        self.budget = bytes;
        self
    }

    /// Makes `session_id` spill into `dir` (its own folder's `spill/`) from now on.
    pub fn place_session(&self, session_id: &str, dir: PathBuf) {
        dsh_sync::lock(&self.placed).insert(session_id.to_owned(), dir);
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The per-session directory (created if missing).
    pub fn session_dir(&self, session_id: &str) -> io::Result<PathBuf> {
        let placed = dsh_sync::lock(&self.placed).get(session_id).cloned();
        let dir = match placed {
            Some(dir) => dir,
            None => {
                let digest = Sha256::digest(session_id.as_bytes());
                let hex: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
                self.root.join(format!("session-{hex}"))
            }
        };
        DirBuilder::new().recursive(true).mode(0o700).create(&dir)?;
        Ok(dir)
    }

    /// Creates a fresh private file for `suggested_name` and returns it open for writing.
    pub fn create(&self, session_id: &str, suggested_name: &str) -> io::Result<(PathBuf, File)> {
        let dir = self.session_dir(session_id)?;
        let mut rng = rand::rng();
        // A collision of 48 random bits is practically impossible; retry a few times anyway
        // because the file is opened exclusively.
        let mut last_err = io::Error::other("could not create a spill file");
        for _ in 0..4 {
            let prefix: String = (0..6)
                .map(|_| format!("{:02x}", rng.random::<u8>()))
                .collect();
            let path = dir.join(format!("{prefix}-{}", encode_segment(suggested_name)));
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
            {
                Ok(file) => {
                    enforce_budget(&dir, &path, self.budget);
                    return Ok((path, file));
                }
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists => last_err = err,
                Err(err) => return Err(err),
            }
        }
        Err(last_err)
    }

    /// `saveText`: writes `content` to a new spill file.
    pub fn save_text(
        &self,
        session_id: &str,
        suggested_name: &str,
        content: &str,
    ) -> io::Result<SpillSaved> {
        let (path, mut file) = self.create(session_id, suggested_name)?;
        file.write_all(content.as_bytes())?;
        if let Some(dir) = path.parent() {
            enforce_budget(dir, &path, self.budget);
        }
        Ok(SpillSaved {
            locator: path.to_string_lossy().into_owned(),
            bytes: content.len() as u64,
            retrieval_hint: RETRIEVAL_HINT.to_owned(),
        })
    }
}

/// Deletes the oldest files of `dir` (never `keep`) until it holds at most `budget` bytes.
fn enforce_budget(dir: &Path, keep: &Path, budget: u64) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut files: Vec<(std::time::SystemTime, u64, PathBuf)> = entries
        .flatten()
        .filter_map(|entry| {
            let meta = entry.metadata().ok()?;
            if !meta.is_file() {
                return None;
            }
            Some((meta.modified().ok()?, meta.len(), entry.path()))
        })
        .collect();
    let mut total: u64 = files.iter().map(|(_, len, _)| *len).sum();
    if total <= budget {
        return;
    }
    files.sort_by_key(|(modified, _, _)| *modified);
    for (_, len, path) in files {
        if total <= budget {
            break;
        }
        if path == keep {
            continue;
        }
        if std::fs::remove_file(&path).is_ok() {
            tracing::debug!(path = %path.display(), "spill retention removed an old file");
            total = total.saturating_sub(len);
        }
    }
}

/// Removes `dsh-spill-<pid>` folders under `temp` whose process is gone.
fn remove_orphaned_roots(temp: &Path) {
    let Ok(entries) = std::fs::read_dir(temp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix("dsh-spill-")) else {
            continue;
        };
        if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// `encodeSegment`: keeps `[A-Za-z0-9._-]`, escapes every other UTF-16 unit as `~XXXX`.
pub fn encode_segment(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for ch in name.chars() {
        if ch.is_ascii_alphanumeric() || matches!(ch, '.' | '_' | '-') {
            out.push(ch);
        } else {
            let mut units = [0u16; 2];
            for unit in ch.encode_utf16(&mut units) {
                out.push_str(&format!("~{unit:04X}"));
            }
        }
    }
    out
}

/// The generic spill policy's replacement text for `text` under `cap` bytes, given the
/// locator the full text was saved at. `None` means "keep the original" (fits, or the
/// replacement would still exceed the cap).
pub fn inline_preview(
    text: &str,
    cap: usize,
    locator: &str,
    retrieval_hint: &str,
) -> Option<String> {
    let total = text.len();
    if total <= cap {
        return None;
    }
    let notice = |omitted: usize| {
        format!(
            "(Omitted {omitted} bytes. Full formatted result stored at: {locator}. {retrieval_hint})"
        )
    };
    let budget = cap.saturating_sub(notice(total).len() + 2);
    let head = floor_char_boundary(text, budget.div_ceil(2));
    let tail_start = ceil_char_boundary(text, total - budget / 2);
    let preview_len = head.len() + (total - tail_start);
    let notice_text = notice(total - preview_len);
    let replaced = if preview_len == 0 {
        notice_text
    } else {
        format!("{head}{}\n\n{notice_text}", &text[tail_start..])
    };
    (replaced.len() <= cap).then_some(replaced)
}

/// Applies the generic policy end to end: saves the full text through `store` and returns the
/// replacement, or `None` to keep the original (fits, save failed, replacement too large).
pub fn apply_inline_cap(
    store: &SpillStore,
    session_id: &str,
    tool_name: &str,
    text: &str,
    cap: usize,
) -> Option<String> {
    if text.len() <= cap {
        return None;
    }
    match store.save_text(session_id, &format!("{tool_name}.txt"), text) {
        Ok(saved) => inline_preview(text, cap, &saved.locator, &saved.retrieval_hint),
        Err(err) => {
            tracing::warn!(%err, "spill save failed; keeping the original result");
            None
        }
    }
}

fn floor_char_boundary(text: &str, mut index: usize) -> &str {
    index = index.min(text.len());
    while !text.is_char_boundary(index) {
        index -= 1;
    }
    &text[..index]
}

fn ceil_char_boundary(text: &str, mut index: usize) -> usize {
    while index < text.len() && !text.is_char_boundary(index) {
        index += 1;
    }
    index
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn encode_segment_escapes_unsafe_characters() {
        assert_eq!(encode_segment("bash.txt"), "bash.txt");
        assert_eq!(encode_segment("a b/c"), "a~0020b~002Fc");
    }

    #[test]
    fn preview_keeps_utf8_boundaries_and_cap() {
        let text = "é".repeat(1000);
        let out = inline_preview(&text, 300, "/x/y", RETRIEVAL_HINT).unwrap();
        assert!(out.len() <= 300);
        assert!(out.ends_with(&format!("/x/y. {RETRIEVAL_HINT})")));
        assert!(inline_preview("short", 300, "/x/y", RETRIEVAL_HINT).is_none());
        let notice_only = inline_preview(&"x".repeat(200), 120, "/x", RETRIEVAL_HINT);
        assert!(notice_only.is_none() || notice_only.unwrap().starts_with("(Omitted"));
    }

    #[test]
    fn store_layout_and_permissions() {
        let dir = tempfile::tempdir().unwrap();
        let store = SpillStore::new(dir.path().join("root"));
        let saved = store.save_text("sess", "bash.txt", "hello").unwrap();
        let path = PathBuf::from(&saved.locator);
        let name = path.file_name().unwrap().to_str().unwrap();
        assert_eq!(name.len(), 12 + 1 + "bash.txt".len());
        assert!(name.ends_with("-bash.txt"));
        let session = path
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_str()
            .unwrap();
        let digest = Sha256::digest(b"sess");
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(session, format!("session-{}", &hex[..12]));
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(
            std::fs::metadata(path.parent().unwrap())
                .unwrap()
                .permissions()
                .mode()
                & 0o777,
            0o700
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "hello");
    }
}

#[cfg(test)]
mod retention_tests {
    use super::*;

    #[test]
    fn a_placed_session_spills_into_its_own_folder_within_its_budget() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let store = SpillStore::new(dir.path().join("root")).with_budget(10);
        let folder = dir.path().join("sessions/s1/spill");
        store.place_session("s1", folder.clone());
        let first = store.save_text("s1", "a.txt", "123456").unwrap();
        assert!(Path::new(&first.locator).starts_with(&folder));
        let mode = std::fs::metadata(&folder).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let file_mode = std::fs::metadata(&first.locator)
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(file_mode, 0o600);
        std::thread::sleep(std::time::Duration::from_millis(20));
        let second = store.save_text("s1", "b.txt", "7890123").unwrap();
        // Over the budget: the oldest file goes, the new one stays.
        assert!(!Path::new(&first.locator).exists());
        assert!(Path::new(&second.locator).exists());
        // Other sessions still use the root.
        let other = store.save_text("s2", "c.txt", "x").unwrap();
        assert!(Path::new(&other.locator).starts_with(dir.path().join("root")));
    }

    #[test]
    fn folders_of_gone_processes_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("dsh-spill-999999999");
        let mine = dir.path().join(format!("dsh-spill-{}", std::process::id()));
        std::fs::create_dir_all(&gone).unwrap();
        std::fs::create_dir_all(&mine).unwrap();
        remove_orphaned_roots(dir.path());
        assert!(!gone.exists());
        assert!(mine.exists());
    }
}
