//! File operations relative to opened directory handles, so that a path checked by the policy
//! is the path used: every component of the (canonical) path is opened with `O_NOFOLLOW`,
//! and the final open, create, link or rename happens inside the last directory's handle. A
//! concurrent swap of a directory for a symlink anywhere along the path makes the operation
//! fail instead of landing outside the checked folder.

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::Component;
use std::path::Path;

use rustix::fs::AtFlags;
use rustix::fs::Mode;
use rustix::fs::OFlags;

/// Opens the directory `dir` (absolute) one component at a time, refusing symlinks; with
/// `create`, missing directories are made on the way.
pub(crate) fn open_dir(dir: &Path, create: bool) -> io::Result<OwnedFd> {
    let mut current = rustix::fs::open(
        "/",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    for component in dir.components() {
        let name = match component {
            Component::RootDir => continue,
            Component::Normal(name) => name,
            // A checked path is canonical: `.`/`..` here means someone else built it.
            Component::CurDir | Component::ParentDir | Component::Prefix(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "the path is not canonical",
                ));
            }
        };
        current = match open_child_dir(&current, name) {
            Err(error) if create && error == rustix::io::Errno::NOENT => {
                match rustix::fs::mkdirat(&current, name, Mode::from_raw_mode(0o777)) {
                    Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                    Err(error) => return Err(error.into()),
                }
                open_child_dir(&current, name)?
            }
            other => other?,
        };
    }
    Ok(current)
}

fn open_child_dir(parent: &OwnedFd, name: &OsStr) -> rustix::io::Result<OwnedFd> {
    let fd = rustix::fs::openat(
        parent,
        name,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    // `O_PATH | O_NOFOLLOW` on a symlink opens the link itself; never walk through one.
    if rustix::fs::fstat(&fd)?.st_mode & 0o170000 != 0o040000 {
        return Err(rustix::io::Errno::NOTDIR);
    }
    Ok(fd)
}

/// Splits a checked target into its directory and final name.
fn split(target: &Path) -> io::Result<(&Path, &OsStr)> {
    match (target.parent(), target.file_name()) {
        (Some(parent), Some(name)) => Ok((parent, name)),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the path names no file",
        )),
    }
}

/// Opens an existing file for reading without following a symlink anywhere on its path.
pub(crate) fn open_read(path: &Path) -> io::Result<File> {
    let (parent, name) = split(path)?;
    let dir = open_dir(parent, false)?;
    let fd = rustix::fs::openat(
        &dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK,
        Mode::empty(),
    )?;
    let file = File::from(fd);
    // Opened non-blocking so a FIFO cannot hang the open; reads of regular files ignore it.
    let flags = rustix::fs::fcntl_getfl(&file)?;
    rustix::fs::fcntl_setfl(&file, flags - OFlags::NONBLOCK)?;
    Ok(file)
}

/// Reads a whole existing file (see [`open_read`]).
pub(crate) fn read(path: &Path) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let mut file = open_read(path)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Writes `content` to `target` atomically inside the target's directory handle: a temp file
/// (exclusive, no symlink follow) is filled and fsynced, then renamed over the target, or
/// hard-linked to it with `create_new` (failing if the target appeared meanwhile: `Ok(false)`).
/// An overwritten file keeps its mode; a new one gets what an editor's would: 0666 less the
/// umask (the kernel applies it, and a default ACL of the folder, at creation).
pub(crate) fn atomic_write(target: &Path, content: &[u8], create_new: bool) -> io::Result<bool> {
    let (parent, name) = split(target)?;
    let dir = open_dir(parent, true)?;
    let existing_mode = match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) if stat.st_mode & 0o170000 == 0o100000 => Some(stat.st_mode & 0o7777),
        _ => None,
    };
    // Private until it is filled when it replaces a file (whose mode it then takes).
    let create_mode = if existing_mode.is_some() {
        0o600
    } else {
        0o666
    };
    let random: [u8; 6] = rand::random();
    let tmp = format!(
        ".{}.dsh-{}.tmp",
        name.to_string_lossy(),
        crate::text::hex(&random)
    );
    let fd = rustix::fs::openat(
        &dir,
        tmp.as_str(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(create_mode),
    )?;
    let result = (|| -> io::Result<bool> {
        let mut file = File::from(fd);
        file.write_all(content)?;
        if let Some(mode) = existing_mode {
            rustix::fs::fchmod(&file, Mode::from_raw_mode(mode))?;
        }
        file.sync_all()?;
        drop(file);
        if create_new {
            match rustix::fs::linkat(&dir, tmp.as_str(), &dir, name, AtFlags::empty()) {
                Ok(()) => {}
                Err(rustix::io::Errno::EXIST) => return Ok(false),
                Err(error) => return Err(error.into()),
            }
            rustix::fs::unlinkat(&dir, tmp.as_str(), AtFlags::empty())?;
        } else {
            rustix::fs::renameat(&dir, tmp.as_str(), &dir, name)?;
        }
        Ok(true)
    })();
    if !matches!(result, Ok(true)) || create_new {
        let _ = rustix::fs::unlinkat(&dir, tmp.as_str(), AtFlags::empty());
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symlinked_component_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(base.join("real")).unwrap();
        std::fs::create_dir_all(base.join("outside")).unwrap();
        std::os::unix::fs::symlink(base.join("outside"), base.join("link")).unwrap();
        assert!(atomic_write(&base.join("real/a.txt"), b"a", false).unwrap());
        assert_eq!(std::fs::read(base.join("real/a.txt")).unwrap(), b"a");
        assert!(atomic_write(&base.join("link/b.txt"), b"b", false).is_err());
        assert!(!base.join("outside/b.txt").exists());
        assert!(atomic_write(&base.join("new/deeper/c.txt"), b"c", true).unwrap());
        assert!(!atomic_write(&base.join("new/deeper/c.txt"), b"d", true).unwrap());
        assert_eq!(read(&base.join("new/deeper/c.txt")).unwrap(), b"c");
        std::fs::write(base.join("outside/secret"), "s").unwrap();
        std::os::unix::fs::symlink(base.join("outside/secret"), base.join("real/s")).unwrap();
        assert!(
            read(&base.join("real/s")).is_err(),
            "a final symlink is not followed"
        );
        assert!(read(&base.join("link/secret")).is_err());
    }
}
