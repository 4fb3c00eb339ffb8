use super::*;
use pretty_assertions::assert_eq;

fn fg(
    stdout: &str,
    stderr: &str,
    exit_code: Option<i32>,
    signal: Option<&str>,
    timed_out: bool,
) -> BashOutput {
    BashOutput::Foreground {
        exit_code,
        signal: signal.map(str::to_owned),
        timed_out,
        aborted: false,
        timeout_ms: 100.0,
        stdout: StreamText {
            text: stdout.into(),
            truncated: false,
            spill_path: None,
            spill_missing: None,
        },
        stderr: StreamText {
            text: stderr.into(),
            truncated: false,
            spill_path: None,
            spill_missing: None,
        },
        sandbox: None,
    }
}

#[test]
fn render_matches_spec_examples() {
    assert_eq!(
        render_text(&fg("hello\n", "", Some(0), None, false)),
        "hello\n"
    );
    assert_eq!(
        render_text(&fg("", "", Some(0), None, false)),
        "(no output)"
    );
    assert_eq!(
        render_text(&fg("out\n", "err\n", Some(0), None, false)),
        "out\n[stderr]\nerr\n"
    );
    assert_eq!(
        render_text(&fg("out", "err\n", Some(0), None, false)),
        "out\n[stderr]\nerr\n"
    );
    assert_eq!(
        render_text(&fg("failing\n", "", Some(3), None, false)),
        "failing\n[exit code: 3]"
    );
    assert_eq!(
        render_text(&fg("", "", None, Some("SIGTERM"), true)),
        "(no output)\n[timed out after 100ms]\n[killed by signal: SIGTERM]"
    );
    assert_eq!(
        render_text(&fg("", "", Some(0), None, true)),
        "(no output)\n[timed out after 100ms]"
    );
    assert_eq!(
        render_text(&BashOutput::Background {
            job_id: "bash-1".into()
        }),
        "started background job bash-1"
    );
}

#[test]
fn truncated_streams_name_their_spill() {
    let mut out = fg("tail", "", Some(0), None, false);
    if let BashOutput::Foreground { stdout, .. } = &mut out {
        stdout.truncated = true;
        stdout.spill_path = Some("/s/x-bash-stdout.txt".into());
    }
    assert_eq!(
        render_text(&out),
        "tail\n[output truncated; full output: /s/x-bash-stdout.txt]"
    );
    if let BashOutput::Foreground { stdout, .. } = &mut out {
        stdout.spill_path = None;
    }
    assert_eq!(
        render_text(&out),
        "tail\n[output truncated; full output: (unavailable)]"
    );
}

#[test]
fn canonical_value_shape() {
    let value = serde_json::to_value(fg("a\n", "", Some(0), None, false)).unwrap();
    assert_eq!(
        value,
        json!({"kind":"foreground","exitCode":0,"signal":null,"timedOut":false,"aborted":false,"timeoutMs":100.0,
               "stdout":{"text":"a\n","truncated":false},"stderr":{"text":"","truncated":false}})
    );
    let bg = serde_json::to_value(BashOutput::Background {
        job_id: "bash-2".into(),
    })
    .unwrap();
    assert_eq!(bg, json!({"kind":"background","jobId":"bash-2"}));
}

#[test]
fn result_card_parses_trailing_markers() {
    assert_eq!(
        parse_terminal_marker("failing\n[exit code: 3]"),
        ("failing".into(), Some(3), None)
    );
    assert_eq!(
        parse_terminal_marker("(no output)\n[timed out after 100ms]\n[killed by signal: SIGTERM]"),
        (
            "(no output)\n[timed out after 100ms]".into(),
            None,
            Some("SIGTERM".into())
        )
    );
    assert_eq!(
        parse_terminal_marker("[exit code: 3]"),
        ("[exit code: 3]".into(), Some(0), None)
    );
    assert_eq!(
        parse_terminal_marker("hello\n"),
        ("hello\n".into(), Some(0), None)
    );
    let args = BashArgs::new("exit 3", "Fail");
    let card = present_result(&args, &[ContentBlock::text("x\n[exit code: 3]")], false);
    assert_eq!(
        serde_json::to_value(card).unwrap(),
        json!({"card":"terminal","output":"x","exitCode":3})
    );
    let err = present_result(&args, &[ContentBlock::text("Error: boom\n\n")], true);
    assert_eq!(
        serde_json::to_value(err).unwrap(),
        json!({"card":"generic","content":[{"type":"text","text":"```console\nError: boom\n```"}]})
    );
}

#[test]
fn call_cards() {
    let mut args = BashArgs::new("ls", "List files");
    args.workdir = Some("sub".into());
    assert_eq!(
        serde_json::to_value(present_call(&args)).unwrap(),
        json!({"card":"terminal","title":"ls","description":"List files","cwd":"sub"})
    );
    args.run_in_background = Some(true);
    assert_eq!(
        serde_json::to_value(present_call(&args)).unwrap(),
        json!({"card":"generic","title":"ls","kind":"execute","rawInput":"ls","content":[{"type":"text","text":"List files"}]})
    );
}

#[test]
fn validation_texts() {
    let ctx = ShellContext::new("/", "s");
    let check = |args: BashArgs| validate(&args, &ctx).unwrap_err().message;
    assert_eq!(
        check(BashArgs::new("  ", "d")),
        "invalid command: expected a non-empty string"
    );
    assert_eq!(
        check(BashArgs::new("ls", "")),
        "invalid description: expected a non-empty string"
    );
    let mut args = BashArgs::new("ls", "d");
    args.timeout_ms = Some(-5.0);
    assert_eq!(
        check(args.clone()),
        "invalid timeoutMs: expected a positive number, got -5"
    );
    args.timeout_ms = Some(0.0);
    assert_eq!(
        check(args),
        "invalid timeoutMs: expected a positive number, got 0"
    );
    let mut args = BashArgs::new("ls", "d");
    args.sandbox_permissions = Some(SandboxPermissions::DangerFullAccess);
    assert_eq!(
        check(args.clone()),
        "invalid escalation: sandbox_permissions requires a justification"
    );
    args.justification = Some(" ".into());
    assert_eq!(
        check(args.clone()),
        "invalid justification: expected a non-empty sentence"
    );
    args.justification = Some("needed".into());
    assert_eq!(
        check(args),
        "sandbox_permissions is not available in this composition (no sandboxing executor to escalate)"
    );
    let mut args = BashArgs::new("ls", "d");
    args.justification = Some("why".into());
    assert_eq!(
        check(args),
        "invalid escalation: justification is only valid together with sandbox_permissions"
    );
    let mut disabled = ShellContext::new("/", "s");
    disabled.config.enable_run_in_background = false;
    let mut args = BashArgs::new("ls", "d");
    args.run_in_background = Some(true);
    assert_eq!(
        validate(&args, &disabled).unwrap_err().message,
        "run_in_background is disabled for this deployment (enableRunInBackground: false)"
    );
}

#[test]
fn args_use_upstream_names() {
    let args: BashArgs = serde_json::from_value(json!({
        "command": "ls", "description": "d", "timeoutMs": 5, "workdir": "w",
        "run_in_background": true, "sandbox_permissions": "workspace-write", "justification": "j",
        "extra": 1
    }))
    .unwrap();
    assert_eq!(args.timeout_ms, Some(5.0));
    assert_eq!(
        args.sandbox_permissions,
        Some(SandboxPermissions::WorkspaceWrite)
    );
    assert_eq!(args.run_in_background, Some(true));
}

#[test]
fn workdir_resolution() {
    let ctx = ShellContext::new("/ws", "s");
    let mut args = BashArgs::new("ls", "d");
    assert_eq!(resolve_workdir(&args, &ctx), PathBuf::from("/ws"));
    args.workdir = Some("sub/dir".into());
    assert_eq!(resolve_workdir(&args, &ctx), PathBuf::from("/ws/sub/dir"));
    args.workdir = Some("/abs".into());
    assert_eq!(resolve_workdir(&args, &ctx), PathBuf::from("/abs"));
}

#[test]
fn sandbox_markers_precede_timeout_and_exit() {
    let mut out = fg(
        "",
        "bash: /etc/x: Read-only file system\n",
        Some(1),
        None,
        false,
    );
    if let BashOutput::Foreground { sandbox, .. } = &mut out {
        *sandbox = Some(SandboxReport {
            mode: SandboxMode::WorkspaceWrite,
            denied: true,
            enforcement: Some("bwrap".into()),
            runner_failed: None,
            limit: None,
        });
    }
    let hint = "[sandbox: escalation available — retry this exact command once with sandbox_permissions (the narrowest wider mode that suffices) + justification; the approval prompt asks the user]";
    assert_eq!(
        render_text(&out),
        format!(
            "[stderr]\nbash: /etc/x: Read-only file system\n[sandbox: file access denied under workspace-write mode]\n{hint}\n[exit code: 1]"
        )
    );
    assert_eq!(
        render_text_with(&out, false),
        "[stderr]\nbash: /etc/x: Read-only file system\n[sandbox: file access denied under workspace-write mode]\n[exit code: 1]"
    );
    let value = serde_json::to_value(&out).unwrap();
    assert_eq!(
        value["sandbox"],
        serde_json::json!({"mode": "workspace-write", "denied": true, "enforcement": "bwrap"})
    );
    let plain = serde_json::to_value(fg("", "", Some(0), None, false)).unwrap();
    assert!(plain.get("sandbox").is_none());
}
