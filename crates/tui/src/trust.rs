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
    let _ = write!(err, "{}", question(project));
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
    let recorded = format!(
        "Recorded: {} is {} (in {}).",
        project.folder.display(),
        trust.as_str(),
        file.display()
    );
    let _ = writeln!(
        std::io::stderr().lock(),
        "{}",
        dsh_secrets::terminal_safe(&recorded)
    );
    Ok(trust == Trust::Trusted)
}

/// The question, made safe for the terminal: the key names come from the untrusted project's
/// own file (a quoted TOML key may hold any character), the paths from the file system.
fn question(project: &ProjectLayer) -> String {
    let text = format!(
        "{} wants settings only a trusted folder may use: {}.\nTrust {}? [y/N] ",
        project.file.display(),
        project.ignored.join(", "),
        project.folder.display()
    );
    dsh_secrets::terminal_safe(&text).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_projects_key_names_cannot_drive_the_terminal() {
        let project = ProjectLayer {
            file: "/src/app/.dsh/config.toml".into(),
            folder: "/src/app".into(),
            trust: None,
            trusted: false,
            ignored: vec![
                "model.base_url".to_owned(),
                "\u{1b}]52;c;eA==\u{7}".to_owned(),
            ],
            unusable: None,
        };
        assert_eq!(
            question(&project),
            "/src/app/.dsh/config.toml wants settings only a trusted folder may use: model.base_url, \\u001b]52;c;eA==\\u0007.\nTrust /src/app? [y/N] "
        );
    }
}
