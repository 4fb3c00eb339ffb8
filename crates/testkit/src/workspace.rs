//! Creates a scenario's workspace (conformance README "Workspace"): text, binary, symlink and
//! executable files, modification times, and the `temp` / `home` location.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use serde_json::Value;

use crate::error::{Result, TestkitError};
use crate::scenario::WorkspaceSpec;

/// A laid-out workspace; the directory is removed on drop.
#[derive(Debug)]
pub struct Workspace {
    dir: tempfile::TempDir,
}

impl Workspace {
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// Creates the workspace directory (under the temp dir, or under `$HOME` for `location: "home"`)
/// and writes every file.
pub fn lay_out(spec: &WorkspaceSpec) -> Result<Workspace> {
    let builder = {
        let mut b = tempfile::Builder::new();
        b.prefix("dsh-conformance-");
        b
    };
    let dir = match spec.location.as_deref() {
        Some("home") => {
            let home = std::env::var_os("HOME").map(PathBuf::from).ok_or_else(|| {
                TestkitError::Workspace("location \"home\" but $HOME is unset".into())
            })?;
            builder
                .tempdir_in(&home)
                .map_err(|e| TestkitError::io(home, e))?
        }
        _ => builder
            .tempdir()
            .map_err(|e| TestkitError::io(std::env::temp_dir(), e))?,
    };
    write_files(dir.path(), spec)?;
    Ok(Workspace { dir })
}

/// Writes `spec.files` and then applies `spec.mtimes` inside `root`.
pub fn write_files(root: &Path, spec: &WorkspaceSpec) -> Result<()> {
    for (rel, content) in &spec.files {
        let path = safe_join(root, rel)?;
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| TestkitError::io(parent, e))?;
        }
        write_entry(&path, rel, content)?;
    }
    for (rel, when) in &spec.mtimes {
        let path = safe_join(root, rel)?;
        let text = when
            .as_str()
            .ok_or_else(|| TestkitError::Workspace(format!("mtime of {rel} is not a string")))?;
        let time = parse_wall_clock(text)
            .ok_or_else(|| TestkitError::Workspace(format!("bad mtime {text:?} for {rel}")))?;
        let file = std::fs::File::options()
            .write(true)
            .open(&path)
            .or_else(|_| std::fs::File::open(&path))
            .map_err(|e| TestkitError::io(&path, e))?;
        file.set_modified(time)
            .map_err(|e| TestkitError::io(&path, e))?;
    }
    Ok(())
}

fn safe_join(root: &Path, rel: &str) -> Result<PathBuf> {
    let p = Path::new(rel);
    let escapes = p.is_absolute()
        || p.components()
            .any(|c| matches!(c, std::path::Component::ParentDir));
    if escapes {
        return Err(TestkitError::Workspace(format!(
            "path escapes the workspace: {rel}"
        )));
    }
    Ok(root.join(p))
}

fn write_entry(path: &Path, rel: &str, content: &Value) -> Result<()> {
    let bad = || TestkitError::Workspace(format!("unsupported file entry for {rel}"));
    let (bytes, executable) = match content {
        Value::String(text) => (text.as_bytes().to_vec(), false),
        Value::Object(obj) => {
            if let Some(target) = obj.get("symlink").and_then(Value::as_str) {
                std::os::unix::fs::symlink(target, path).map_err(|e| TestkitError::io(path, e))?;
                return Ok(());
            }
            let executable = obj
                .get("executable")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            if let Some(text) = obj.get("text").and_then(Value::as_str) {
                (text.as_bytes().to_vec(), executable)
            } else if let Some(b64) = obj.get("base64").and_then(Value::as_str) {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .map_err(|e| TestkitError::Workspace(format!("{rel}: bad base64: {e}")))?;
                (bytes, executable)
            } else {
                return Err(bad());
            }
        }
        _ => return Err(bad()),
    };
    std::fs::write(path, bytes).map_err(|e| TestkitError::io(path, e))?;
    if executable {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| TestkitError::io(path, e))?;
    }
    Ok(())
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.mmm]`. The README calls it local time, but only the relative
/// order matters, so it is read as UTC (same offset for every file keeps the order).
pub fn parse_wall_clock(s: &str) -> Option<SystemTime> {
    let (date, time) = s.split_once('T')?;
    let mut d = date.split('-').map(|p| p.parse::<i64>().ok());
    let (y, mo, day) = (d.next()??, d.next()??, d.next()??);
    let (hms, millis) = match time.split_once('.') {
        Some((hms, ms)) => (hms, ms.parse::<u64>().ok()?),
        None => (time, 0),
    };
    let mut t = hms.split(':').map(|p| p.parse::<i64>().ok());
    let (h, mi, sec) = (t.next()??, t.next()??, t.next()??);
    let days = days_from_civil(y, mo, day);
    let secs = days * 86_400 + h * 3600 + mi * 60 + sec;
    let secs = u64::try_from(secs).ok()?;
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_millis(millis))
}

/// Howard Hinnant's days-from-civil algorithm.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
#[path = "workspace_tests.rs"]
mod tests;
