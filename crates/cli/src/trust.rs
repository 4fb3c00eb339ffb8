//! `dsh trust`, the start-up notice of an untrusted project layer, and the TUI's one question.
//! The rule itself is `dsh_host::trust`.

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

/// The TUI asks once: when an untrusted folder's project layer had keys ignored and the user
/// never decided about the folder, asks on the terminal (before the UI takes it over) and
/// records the answer. Returns true when the folder is now trusted.
#[allow(clippy::print_stderr)]
pub fn ask_once(home: &Path, project: Option<&dsh_host::ProjectLayer>) -> anyhow::Result<bool> {
    use std::io::BufRead;
    let Some(project) = project.filter(|p| !p.ignored.is_empty() && p.trust.is_none()) else {
        return Ok(false);
    };
    note!(
        "{} wants settings only a trusted folder may use: {}.",
        project.file.display(),
        project.ignored.join(", ")
    );
    crate::out::stderr(format_args!("Trust {}? [y/N] ", project.folder.display()));
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    let trust = if matches!(answer.trim(), "y" | "Y" | "yes" | "Yes") {
        Trust::Trusted
    } else {
        Trust::Untrusted
    };
    let file = record(home, &project.folder, trust)?;
    note!(
        "Recorded: {} is {} (in {}).",
        project.folder.display(),
        trust.as_str(),
        file.display()
    );
    Ok(trust == Trust::Trusted)
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
