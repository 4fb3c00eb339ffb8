//! `dsh trust` and the start-up notice of an untrusted project layer (the TUI's one question
//! is `dsh_tui::ask_trust`). The rule itself is `dsh_host::trust`.

use std::path::Path;
use std::path::PathBuf;

use dsh_host::trust::Trust;
use dsh_host::trust::canonical;
use dsh_host::trust::record;

#[allow(clippy::print_stderr)]
pub fn print_notice(project: Option<&dsh_host::ProjectLayer>) {
    if let Some(notice) = project.and_then(dsh_host::ProjectLayer::notice) {
        note!("{notice}");
    }
}

/// `dsh trust [PATH] [--revoke]`.
#[allow(clippy::print_stdout)]
pub fn command(
    home: &Path,
    folder: Option<PathBuf>,
    revoke: bool,
) -> anyhow::Result<std::process::ExitCode> {
    let folder = match folder {
        Some(folder) => folder,
        None => std::env::current_dir()?,
    };
    if !folder.is_dir() {
        anyhow::bail!("{} is not a folder", folder.display());
    }
    let trust = if revoke {
        Trust::Untrusted
    } else {
        Trust::Trusted
    };
    let file = record(home, &folder, trust)?;
    say!(
        "{} is now {} (recorded in {}).",
        canonical(&folder).display(),
        trust.as_str(),
        file.display()
    )?;
    Ok(std::process::ExitCode::SUCCESS)
}
