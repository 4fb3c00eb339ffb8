//! The one trust question of the UI: asked on the terminal before the UI takes it over, when an
//! untrusted folder's project layer had keys ignored and the user never decided about the
//! folder. The rule itself is `dsh_host::trust`.

use std::io::BufRead;
use std::io::Write;
use std::path::Path;

use dsh_host::ProjectLayer;
use dsh_host::trust::Trust;

/// Asks (stderr, one line from stdin) and records the answer; true when the folder is now
/// trusted. Nothing is asked when there is nothing to decide.
pub fn ask_trust(home: &Path, project: Option<&ProjectLayer>) -> anyhow::Result<bool> {
    let Some(project) = project.filter(|p| !p.ignored.is_empty() && p.trust.is_none()) else {
        return Ok(false);
    };
    // A closed stderr only loses the question's text; the answer still decides.
    let mut err = std::io::stderr().lock();
    let _ = writeln!(
        err,
        "{} wants settings only a trusted folder may use: {}.",
        project.file.display(),
        project.ignored.join(", ")
    );
    let _ = write!(err, "Trust {}? [y/N] ", project.folder.display());
    let _ = err.flush();
    drop(err);
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    let trust = if matches!(answer.trim(), "y" | "Y" | "yes" | "Yes") {
        Trust::Trusted
    } else {
        Trust::Untrusted
    };
    let file = dsh_host::trust::record(home, &project.folder, trust)?;
    let _ = writeln!(
        std::io::stderr().lock(),
        "Recorded: {} is {} (in {}).",
        project.folder.display(),
        trust.as_str(),
        file.display()
    );
    Ok(trust == Trust::Trusted)
}
