use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

fn parse(dialect: Dialect, value: Value) -> Result<HookFile, LoadError> {
    HookFile::from_value(dialect, &value, &Substitutions::default())
}

fn cmd(command: &str) -> Value {
    json!({"type": "command", "command": command})
}

#[test]
fn item_01_an_invalid_matcher_rejects_the_whole_file() {
    let error = parse(
        Dialect::ClaudeCode,
        json!({"hooks": {
            "SessionStart": [{"hooks": [cmd("true")]}],
            "PreToolUse": [{"matcher": "[", "hooks": [cmd("true")]}],
        }}),
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "SyntaxError: invalid claude-code regex matcher \"[\" on event \"PreToolUse\""
    );
    let codex = parse(
        Dialect::Codex,
        json!({"PostToolUse": [{"matcher": "[", "hooks": [cmd("true")]}]}),
    )
    .unwrap_err();
    assert_eq!(
        codex.to_string(),
        "SyntaxError: invalid codex regex matcher \"[\" on event \"PostToolUse\""
    );
}

#[test]
fn item_02_prompt_and_stop_discard_their_matcher() {
    let file = parse(
        Dialect::ClaudeCode,
        json!({"hooks": {
            "UserPromptSubmit": [{"matcher": "[", "hooks": [cmd("a")]}],
            "Stop": [{"matcher": "[", "hooks": [cmd("b")]}],
        }}),
    )
    .unwrap();
    let prompt = &file.groups(Event::UserPromptSubmit)[0];
    assert_eq!(prompt.matcher, None);
    assert!(prompt.matches(""));
    assert_eq!(file.groups(Event::Stop)[0].hooks[0].command, "b");
}

#[test]
fn item_03_unsupported_events_are_ignored_before_parsing() {
    for dialect in [Dialect::ClaudeCode, Dialect::Codex] {
        let file = parse(
            dialect,
            json!({"hooks": {
                "Setup": [{"matcher": "[", "hooks": [cmd("x")]}],
                "Notification": "garbage",
                "PreCompact": [{"matcher": "(", "hooks": [cmd("x")]}],
                "pre_tool_use": [{"hooks": [cmd("x")]}],
                "PreToolUse": [{"matcher": "bash", "hooks": [cmd("ok")]}],
            }}),
        )
        .unwrap();
        assert_eq!(file.groups(Event::PreToolUse).len(), 1);
        assert!(file.skipped.is_empty());
    }
    // Codex does not bridge the subagent events.
    let codex = parse(
        Dialect::Codex,
        json!({"SubagentStart": [{"matcher": "[", "hooks": [cmd("x")]}]}),
    )
    .unwrap();
    assert!(codex.is_empty());
}

#[test]
fn item_04_a_missing_file_is_a_load_error_with_the_node_text() {
    let error = HookFile::load(
        Dialect::ClaudeCode,
        "/nonexistent/hooks.json",
        &Substitutions::default(),
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "Error: ENOENT: no such file or directory, open '/nonexistent/hooks.json'"
    );
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{not json").unwrap();
    let error = HookFile::load(
        Dialect::Codex,
        bad.to_str().unwrap(),
        &Substitutions::default(),
    )
    .unwrap_err();
    assert!(error.to_string().starts_with("SyntaxError: "), "{error}");
}

#[test]
fn item_05_settings_file_and_bare_map_parse_identically() {
    let groups =
        json!([{"matcher": "Edit|Write", "hooks": [cmd("x"), {"command": "y", "timeout": 3}]}]);
    let wrapped = parse(
        Dialect::ClaudeCode,
        json!({"hooks": {"PreToolUse": groups.clone()}}),
    )
    .unwrap();
    let bare = parse(Dialect::ClaudeCode, json!({"PreToolUse": groups})).unwrap();
    let shape = |f: &HookFile| {
        f.groups(Event::PreToolUse)
            .iter()
            .map(|g| (g.matcher.clone(), g.hooks.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(shape(&wrapped), shape(&bare));
    assert_eq!(shape(&bare)[0].1.len(), 2);
    // A non-object root is an empty config; a non-object `hooks` makes the root the map.
    assert!(
        parse(Dialect::ClaudeCode, json!([1, 2]))
            .unwrap()
            .is_empty()
    );
    let odd = parse(
        Dialect::ClaudeCode,
        json!({"hooks": 1, "Stop": [{"hooks": [cmd("s")]}]}),
    )
    .unwrap();
    assert_eq!(odd.groups(Event::Stop).len(), 1);
}

#[test]
fn item_06_a_hook_without_type_is_a_command() {
    let file = parse(
        Dialect::ClaudeCode,
        json!({"PreToolUse": [{"hooks": [{"command": "echo hi"}, {"type": 7, "command": "b"}]}]}),
    )
    .unwrap();
    let hooks = &file.groups(Event::PreToolUse)[0].hooks;
    assert_eq!(hooks.len(), 2);
    assert_eq!(hooks[0].command, "echo hi");
}

#[test]
fn item_07_non_command_hooks_are_skipped_with_the_warning() {
    let file = parse(
        Dialect::ClaudeCode,
        json!({"PostToolUse": [{"hooks": [{"type": "prompt", "prompt": "p"}, cmd("kept"), {"type": "http"}]}]}),
    )
    .unwrap();
    assert_eq!(
        file.skipped,
        vec![
            "hooks-claude-code: skipping unsupported \"prompt\" hook on PostToolUse (only command hooks run)",
            "hooks-claude-code: skipping unsupported \"http\" hook on PostToolUse (only command hooks run)",
        ]
    );
    assert_eq!(file.groups(Event::PostToolUse)[0].hooks[0].command, "kept");
    let codex = parse(
        Dialect::Codex,
        json!({"PreToolUse": [{"hooks": [{"type": "prompt"}]}]}),
    )
    .unwrap();
    assert_eq!(
        codex.skipped,
        vec![
            "hooks-codex: skipping unsupported \"prompt\" hook on PreToolUse (only sync command hooks run)"
        ]
    );
}

#[test]
fn item_08_codex_async_hooks_are_skipped() {
    let file = parse(
        Dialect::Codex,
        json!({"Stop": [{"hooks": [{"command": "x", "async": true}, {"command": "y", "async": false}]}]}),
    )
    .unwrap();
    assert_eq!(
        file.skipped,
        vec!["hooks-codex: skipping async hook on Stop (only sync command hooks run)"]
    );
    assert_eq!(file.groups(Event::Stop)[0].hooks.len(), 1);
    // Claude Code has no such rule.
    let cc = parse(
        Dialect::ClaudeCode,
        json!({"Stop": [{"hooks": [{"command": "x", "async": true}]}]}),
    )
    .unwrap();
    assert_eq!(cc.groups(Event::Stop)[0].hooks.len(), 1);
}

#[test]
fn item_09_codex_timeout_sec_alias_and_precedence() {
    let file = parse(
        Dialect::Codex,
        json!({"PreToolUse": [{"hooks": [
            {"command": "a", "timeoutSec": 4},
            {"command": "b", "timeout": 2, "timeoutSec": 9},
            {"command": "c", "timeout": "x", "timeoutSec": 5},
        ]}]}),
    )
    .unwrap();
    let timeouts: Vec<_> = file.groups(Event::PreToolUse)[0]
        .hooks
        .iter()
        .map(|h| h.timeout_sec)
        .collect();
    assert_eq!(timeouts, vec![Some(4.0), Some(2.0), Some(5.0)]);
    // Claude Code reads only `timeout`, and passes any number through.
    let cc = parse(
        Dialect::ClaudeCode,
        json!({"PreToolUse": [{"hooks": [{"command": "a", "timeoutSec": 4}, {"command": "b", "timeout": -1.5}]}]}),
    )
    .unwrap();
    let hooks = &cc.groups(Event::PreToolUse)[0].hooks;
    assert_eq!(
        (hooks[0].timeout_sec, hooks[1].timeout_sec),
        (None, Some(-1.5))
    );
}

#[test]
fn item_16_claude_code_substitutes_configured_tokens_only() {
    let value = json!({"PreToolUse": [{"hooks": [cmd("${CLAUDE_PLUGIN_ROOT}/a ${CLAUDE_PROJECT_DIR}/b ${CLAUDE_PLUGIN_ROOT}")]}]});
    let subs = Substitutions {
        plugin_root: Some("/plug".into()),
        project_dir: None,
    };
    let file = HookFile::from_value(Dialect::ClaudeCode, &value, &subs).unwrap();
    assert_eq!(
        file.groups(Event::PreToolUse)[0].hooks[0].command,
        "/plug/a ${CLAUDE_PROJECT_DIR}/b /plug"
    );
    let both = Substitutions {
        plugin_root: Some("/plug".into()),
        project_dir: Some("/proj".into()),
    };
    let file = HookFile::from_value(Dialect::ClaudeCode, &value, &both).unwrap();
    assert_eq!(
        file.groups(Event::PreToolUse)[0].hooks[0].command,
        "/plug/a /proj/b /plug"
    );
    let codex = HookFile::from_value(Dialect::Codex, &value, &both).unwrap();
    assert!(
        codex.groups(Event::PreToolUse)[0].hooks[0]
            .command
            .starts_with("${CLAUDE_PLUGIN_ROOT}")
    );
}

#[test]
fn malformed_entries_are_dropped_and_matcher_checks_skip_empty_groups() {
    let file = parse(
        Dialect::ClaudeCode,
        json!({"PreToolUse": [
            "not a group",
            {"hooks": "nope"},
            {"matcher": "[", "hooks": [{"type": "prompt"}]},
            {"matcher": 5, "hooks": [7, {"type": "command"}, cmd("z")]},
        ], "PostToolUse": {"not": "an array"}}),
    )
    .unwrap();
    let groups = file.groups(Event::PreToolUse);
    assert_eq!(groups.len(), 1);
    // A non-string matcher is treated as absent.
    assert_eq!(groups[0].matcher, None);
    assert!(groups[0].matches("anything"));
    assert_eq!(groups[0].hooks.len(), 1);
    assert!(file.groups(Event::PostToolUse).is_empty());
}
