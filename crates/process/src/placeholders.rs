//! The empty folders a `workspace-write` launch creates in the workspace so that a missing
//! protected folder (`.git`, `.dsh`, `.claude`, …) can be mounted read-only, and their removal
//! once no confined command can still see them.
//!
//! A placeholder must outlive every sandbox that mounted it: removing a folder that is a mount
//! point in another mount namespace is allowed, and detaches that mount, so a command still
//! running there could then create the real `.git`. So a placeholder goes only when all of
//! these hold:
//!
//! - the launch that ends holds the workspace's lock exclusively: every launch holds it shared
//!   from before it creates or checks the placeholders until its command has ended, so no
//!   other confined command of a dsh with the same home runs there (the lock file lives in
//!   dsh's home, which confined commands cannot see, so a command cannot hold it itself);
//! - the command's sandbox is empty: its pids cgroup was removed (the kernel refuses while a
//!   process is left in it) and no other dsh cgroup is left beside it, or, without pids
//!   cgroups, no process this dsh can see lives in a PID namespace other than its own;
//! - the folder is one dsh made (its modification time is [`PLACEHOLDER_MTIME`], which any
//!   entry added or removed since would have changed) and is empty (`rmdir` refuses
//!   otherwise, so nothing is ever lost).
//!
//! When any of these fails the placeholders stay, as before, and a later command's end tries
//! again. Launches whose lifetime dsh does not follow (terminals, hooks, a client's terminal)
//! keep their shared lock until dsh exits.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;

/// The modification time (seconds since the epoch) that marks a folder as dsh's placeholder.
pub const PLACEHOLDER_MTIME: i64 = 1;

/// A launch's hold on its workspace's placeholders: the shared lock, and the placeholders it
/// mounted. Dropped when the command has ended; removes them when [`WorkspaceLease::sandbox_gone`]
/// was called and nothing else holds the lock.
#[derive(Debug)]
pub struct WorkspaceLease {
    lock: Option<File>,
    placeholders: Vec<PathBuf>,
    gone: AtomicBool,
}

impl WorkspaceLease {
    /// Takes `root`'s lock in `lock_dir` shared (waiting out a removal in progress). Without
    /// a lock the lease removes nothing.
    pub(crate) fn take(lock_dir: Option<&Path>, root: &Path) -> Self {
        Self {
            lock: lock_dir.and_then(|dir| lock_shared(dir, root)),
            placeholders: Vec::new(),
            gone: AtomicBool::new(false),
        }
    }

    pub(crate) fn holds_lock(&self) -> bool {
        self.lock.is_some()
    }

    pub(crate) fn set_placeholders(&mut self, placeholders: Vec<PathBuf>) {
        self.placeholders = placeholders;
    }

    /// The placeholders this launch mounted.
    pub fn placeholders(&self) -> &[PathBuf] {
        &self.placeholders
    }

    /// Every process of the command's sandbox has ended: the placeholders may go.
    pub fn sandbox_gone(&self) {
        self.gone.store(true, Ordering::Release);
    }

    /// Keeps the shared lock until dsh exits: for a launch whose end dsh does not see.
    pub fn hold_until_exit(self) {
        if self.lock.is_some() {
            held()
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(self);
        }
    }
}

fn held() -> &'static Mutex<Vec<WorkspaceLease>> {
    static HELD: Mutex<Vec<WorkspaceLease>> = Mutex::new(Vec::new());
    &HELD
}

impl Drop for WorkspaceLease {
    fn drop(&mut self) {
        let Some(lock) = self.lock.take() else {
            return;
        };
        if self.placeholders.is_empty() || !*self.gone.get_mut() {
            return;
        }
        // Converting shared to exclusive fails while any other launch holds the lock.
        if rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_err() {
            return;
        }
        for dir in self.placeholders.iter().rev() {
            if is_placeholder(dir) {
                // Refused when not empty: nothing but an empty folder is ever removed.
                let _ = std::fs::remove_dir(dir);
            }
        }
        drop(lock);
    }
}

/// Creates `dir` empty and marks it as dsh's placeholder.
pub(crate) fn create(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir(dir)?;
    let marked = rustix::fs::Timestamps {
        last_access: rustix::fs::Timespec {
            tv_sec: PLACEHOLDER_MTIME,
            tv_nsec: 0,
        },
        last_modification: rustix::fs::Timespec {
            tv_sec: PLACEHOLDER_MTIME,
            tv_nsec: 0,
        },
    };
    if let Err(error) = rustix::fs::utimensat(
        rustix::fs::CWD,
        dir,
        &marked,
        rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
    ) {
        // Unmarked, it is never removed: the old behaviour, nothing worse.
        tracing::debug!(path = %dir.display(), %error, "cannot mark a placeholder");
    }
    Ok(())
}

/// Whether `dir` is a folder dsh made as a placeholder and nothing changed since.
pub fn is_placeholder(dir: &Path) -> bool {
    std::fs::symlink_metadata(dir)
        .is_ok_and(|meta| meta.is_dir() && meta.mtime() == PLACEHOLDER_MTIME)
}

fn lock_shared(dir: &Path, root: &Path) -> Option<File> {
    use std::os::unix::fs::DirBuilderExt;
    use std::os::unix::fs::OpenOptionsExt;
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true).mode(0o700);
    let opened = builder.create(dir).and_then(|()| {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(dir.join(lock_name(root)))
    });
    let file = match opened {
        Ok(file) => file,
        Err(error) => {
            tracing::debug!(dir = %dir.display(), %error, "no workspace lock: placeholders stay");
            return None;
        }
    };
    loop {
        match rustix::fs::flock(&file, rustix::fs::FlockOperation::LockShared) {
            Ok(()) => return Some(file),
            Err(rustix::io::Errno::INTR) => {}
            Err(error) => {
                tracing::debug!(%error, "cannot lock the workspace: placeholders stay");
                return None;
            }
        }
    }
}

/// `workspace-<FNV-1a of the canonical path>.lock`: stable across processes and versions.
fn lock_name(root: &Path) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in root.as_os_str().as_encoded_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("workspace-{hash:016x}.lock")
}

/// Whether a process visible here that started at or after `since` (clock ticks after boot,
/// as `/proc/<pid>/stat` counts them) lives in a PID namespace other than this process's:
/// the sandbox launched then may still be running. Older ones (another program's sandbox,
/// a container) cannot be it.
pub(crate) fn another_pid_namespace_runs(since: u64) -> bool {
    let Ok(own) = std::fs::read_link("/proc/self/ns/pid") else {
        return true;
    };
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return true;
    };
    entries.flatten().any(|entry| {
        let name = entry.file_name();
        name.as_encoded_bytes().iter().all(u8::is_ascii_digit)
            && std::fs::read_link(entry.path().join("ns/pid")).is_ok_and(|ns| ns != own)
            // A zombie has ended (a namespace's init only once all the others have).
            && stat_fields(&entry.path())
                .is_none_or(|(state, start)| !matches!(state, 'Z' | 'X') && start >= since)
    })
}

/// When the process at `/proc/<pid>` (`dir`) started, in clock ticks after boot.
pub(crate) fn start_ticks(dir: &Path) -> Option<u64> {
    stat_fields(dir).map(|(_, start)| start)
}

/// The state letter and start time of the process at `dir`.
fn stat_fields(dir: &Path) -> Option<(char, u64)> {
    let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
    // The command name may hold spaces and parentheses: fields are counted after the last `)`.
    let mut rest = stat[stat.rfind(')')? + 1..].split_whitespace();
    let state = rest.next()?.chars().next()?;
    let start = rest.nth(18)?.parse().ok()?;
    Some((state, start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_ticks_of_this_process() {
        let own = start_ticks(Path::new("/proc/self")).unwrap();
        let parent = start_ticks(Path::new(&format!(
            "/proc/{}",
            std::os::unix::process::parent_id()
        )));
        assert!(parent.is_some_and(|parent| parent <= own));
        assert!(!another_pid_namespace_runs(u64::MAX) || Path::new("/proc/1/ns/pid").exists());
    }

    #[test]
    fn a_placeholder_is_marked_and_recognised() {
        let dir = tempfile::tempdir().unwrap();
        let made = dir.path().join(".git");
        create(&made).unwrap();
        assert!(is_placeholder(&made));
        let own = dir.path().join(".claude");
        std::fs::create_dir(&own).unwrap();
        assert!(!is_placeholder(&own), "a person's own folder");
        std::fs::create_dir(made.join("hooks")).unwrap();
        assert!(!is_placeholder(&made), "no longer empty");
    }

    #[test]
    fn a_lease_removes_only_empty_placeholders_and_only_when_alone() {
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let locks = home.path().join("locks");
        let (empty, filled, own) = (
            ws.path().join(".dsh"),
            ws.path().join(".git"),
            ws.path().join(".claude"),
        );
        for dir in [&empty, &filled] {
            create(dir).unwrap();
        }
        std::fs::create_dir(&own).unwrap();
        let lease = |gone: bool| {
            let mut lease = WorkspaceLease::take(Some(&locks), ws.path());
            assert!(lease.holds_lock());
            lease.set_placeholders(vec![empty.clone(), filled.clone(), own.clone()]);
            if gone {
                lease.sandbox_gone();
            }
            lease
        };
        std::fs::write(filled.join("config"), "x").unwrap();
        // Another launch still runs: nothing goes.
        let other = lease(false);
        drop(lease(true));
        assert!(empty.is_dir());
        drop(other);
        // A sandbox not known to be gone: nothing goes.
        drop(lease(false));
        assert!(empty.is_dir());
        drop(lease(true));
        assert!(!empty.exists(), "dsh's empty placeholder is removed");
        assert!(filled.join("config").is_file(), "a filled one stays");
        assert!(own.is_dir(), "the person's own folder stays");
    }
}
