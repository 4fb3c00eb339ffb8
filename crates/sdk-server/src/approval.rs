//! Approvals of an SDK session: the client answers no server→client request, so, as in
//! `dsh exec`, a call that needs approval is refused and stderr names the setting that
//! allows it.

use dsh_kernel::BoxFuture;
use dsh_tools::ApprovalOutcome;
use dsh_tools::ApprovalRequest;
use dsh_tools::ApprovalService;

use crate::Note;

pub struct Refuse {
    pub note: Note,
}

/// `escalate sandbox to <mode>: …` → `<mode>`.
fn escalation_mode(reason: Option<&str>) -> Option<&str> {
    let rest = reason?.strip_prefix("escalate sandbox to ")?;
    Some(rest.split_once(':').map_or(rest, |(mode, _)| mode))
}

/// The stderr note for a refused approval.
pub fn refusal_note(tool: &str, reason: Option<&str>) -> String {
    match escalation_mode(reason) {
        Some(mode) => format!(
            "dsh: {tool} asked to run outside the sandbox (\"{mode}\"); an SDK session cannot ask for approval, so it was refused. Allow it with `[plugins.sandbox] mode = \"{mode}\"` in $DSH_HOME/config.toml."
        ),
        None => {
            let why = reason
                .filter(|r| !r.trim().is_empty())
                .map(|r| format!(" ({r})"))
                .unwrap_or_default();
            format!(
                "dsh: {tool} needs approval{why}; an SDK session cannot ask, so it was refused. Allow such calls with `[plugins.approval] policy` or the sandbox mode in $DSH_HOME/config.toml."
            )
        }
    }
}

impl ApprovalService for Refuse {
    fn request(&self, request: ApprovalRequest) -> BoxFuture<'static, ApprovalOutcome> {
        (self.note)(&refusal_note(&request.tool_name, request.reason.as_deref()));
        Box::pin(std::future::ready(ApprovalOutcome::Unavailable))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_escalation_names_the_sandbox_setting() {
        let note = refusal_note(
            "bash",
            Some("escalate sandbox to danger-full-access: needs the network"),
        );
        assert!(
            note.contains("[plugins.sandbox] mode = \"danger-full-access\""),
            "{note}"
        );
    }
}
