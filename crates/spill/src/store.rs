//! Spill storage (upstream's `dsh-spill-local` layout) and the inline preview text (§6).
//!
//! Files live at `<root>/session-<first 12 hex of sha256(sessionId)>/<12 random hex>-<name>`;
//! directories are 0700 and files are created exclusively with mode 0600. Nothing is deleted
//! automatically except an executor spill that outgrew its cap.

use std::fs::DirBuilder;
use std::fs::File;
use std::fs::OpenOptions;
use std::io;
use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::path::PathBuf;

use rand::RngExt;
use sha2::Digest;
use sha2::Sha256;

/// The retrieval hint appended to every spill notice.
pub const RETRIEVAL_HINT: &str =
    "Use read with offset/limit, or grep this path to search within it.";

/// Where spill files go.
#[derive(Debug, Clone)]
pub struct SpillStore {
    root: PathBuf,
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
        Self { root: root.into() }
    }

    /// The default root: a per-process private directory under the OS temp directory.
    pub fn in_temp_dir() -> Self {
        Self::new(std::env::temp_dir().join(format!("dsh-spill-{}", std::process::id())))
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The per-session directory (created if missing).
    pub fn session_dir(&self, session_id: &str) -> io::Result<PathBuf> {
        let digest = Sha256::digest(session_id.as_bytes());
        let hex: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
        let dir = self.root.join(format!("session-{hex}"));
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
                Ok(file) => return Ok((path, file)),
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
        Ok(SpillSaved {
            locator: path.to_string_lossy().into_owned(),
            bytes: content.len() as u64,
            retrieval_hint: RETRIEVAL_HINT.to_owned(),
        })
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
