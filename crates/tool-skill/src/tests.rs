use std::path::Path;
use std::sync::Arc;

use dsh_protocol::Message;
use dsh_protocol::text_of;
use pretty_assertions::assert_eq;

use super::catalog::*;
use super::discovery::*;
use super::*;

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn skill_md(name: &str, description: &str, extra: &str, body: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n{extra}---\n\n{body}\n")
}

fn no_homes() -> SkillRoots {
    SkillRoots::default()
}

#[test]
fn names_follow_the_kebab_case_rule() {
    for good in ["a", "snapshot-skill", "a1-b2-3"] {
        assert!(is_valid_name(good), "{good}");
    }
    for bad in ["", "-a", "a-", "a--b", "A", "a_b", "a b", "é"] {
        assert!(!is_valid_name(bad), "{bad}");
    }
}

#[test]
fn frontmatter_reads_fields_flags_and_quoting() {
    let text = "---\nname: \"quoted-name\"\ndescription: 'It''s here'\nwhenToUse: >\n  folded\n  lines\nmetadata:\n  nested: value\ndisable-model-invocation: yes\nuser-invocable: off\n---\n\n  Body line.\n\n";
    let meta = parse_skill(text).unwrap();
    assert_eq!(meta.name, "quoted-name");
    assert_eq!(meta.description, "It's here");
    assert_eq!(meta.when_to_use.as_deref(), Some("folded lines"));
    assert!(!meta.model_invocable);
    assert!(!meta.user_invocable);
    assert_eq!(skill_body(text).unwrap(), "Body line.");
}

#[test]
fn invalid_frontmatter_drops_the_skill() {
    assert_eq!(
        parse_skill("no frontmatter"),
        Err(SkillFileError::NoFrontmatter)
    );
    assert_eq!(
        parse_skill("---\ndescription: d\n---\n"),
        Err(SkillFileError::Missing("name"))
    );
    assert_eq!(
        parse_skill("---\nname: ok\n---\n"),
        Err(SkillFileError::Missing("description"))
    );
    assert_eq!(
        parse_skill("---\nname: Bad_Name\ndescription: d\n---\n"),
        Err(SkillFileError::InvalidName("Bad_Name".to_owned()))
    );
    assert!(matches!(
        parse_skill("---\nname: ok\ndescription: d\nuser-invocable: maybe\n---\n"),
        Err(SkillFileError::InvalidBool { .. })
    ));
}

#[test]
fn discovery_ranks_roots_and_accepts_both_layouts() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("repo");
    let cwd = project.join("sub/dir");
    std::fs::create_dir_all(&cwd).unwrap();
    std::fs::create_dir_all(project.join(".git")).unwrap();
    std::fs::write(project.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    // The sandbox's empty placeholder in the session's folder is no repository.
    std::fs::create_dir_all(cwd.join(".git")).unwrap();
    let home = tmp.path().join("home");
    write(
        &project,
        ".dsh/skills/shared/SKILL.md",
        &skill_md("shared", "from project", "", "p"),
    );
    write(
        &project,
        ".agents/skills/flat.md",
        &skill_md("flat", "flat layout", "", "f"),
    );
    write(
        &home,
        "skills/shared/SKILL.md",
        &skill_md("shared", "from home", "", "h"),
    );
    write(
        &home,
        "skills/home-only/SKILL.md",
        &skill_md("home-only", "home", "", "h"),
    );
    write(
        &home,
        "skills/deep/nested/SKILL.md",
        &skill_md("deep", "too deep", "", "d"),
    );
    write(&home, "skills/broken/SKILL.md", "---\nname: broken\n---\n");
    let roots = SkillRoots {
        dsh_home: Some(home.clone()),
        ..SkillRoots::default()
    };
    assert_eq!(project_root(&cwd), project);
    let skills = roots.discover(&cwd);
    let summary: Vec<(&str, &str)> = skills
        .iter()
        .map(|s| (s.name.as_str(), s.description.as_str()))
        .collect();
    assert_eq!(
        summary,
        vec![
            ("flat", "flat layout"),
            ("home-only", "home"),
            ("shared", "from project")
        ]
    );
    assert_eq!(skills[0].base_dir, project.join(".agents/skills"));
    assert_eq!(skills[2].base_dir, project.join(".dsh/skills/shared"));
    // Without a `.git` ancestor the cwd itself is the project root.
    let loose = tmp.path().join("loose");
    std::fs::create_dir_all(&loose).unwrap();
    assert_eq!(project_root(&loose), loose);
}

#[test]
fn escaping_and_guidance_texts() {
    assert_eq!(escape_attr("a&b\"c<d>"), "a&amp;b&quot;c&lt;d>");
    assert_eq!(escape_text("a&b\"c<d>"), "a&amp;b\"c&lt;d&gt;");
    assert_eq!(
        Guidance::Url("https://x/".into()).text(),
        "Base URL for this skill: https://x/\nResolve relative URLs mentioned by this skill against the base URL before using them. Load referenced resources only as needed."
    );
    assert_eq!(
        Guidance::Opaque("d".into()).text(),
        "Resources for this skill: d\nLoad referenced resources only as needed."
    );
    assert_eq!(
        Guidance::Provider("p".into()).text(),
        "Resources for this skill are managed by provider \"p\".\nLoad referenced resources only as needed."
    );
}

#[test]
fn load_renders_the_recorded_block() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    write(
        cwd,
        ".dsh/skills/snapshot-skill/SKILL.md",
        "---\nname: snapshot-skill\ndescription: Exercise project skill discovery and loading in snapshot tests.\n---\n\nFollow these snapshot-only instructions.\nResolve referenced resources relative to this skill directory.\n",
    );
    let value = load(&no_homes(), cwd, "snapshot-skill").unwrap();
    let base = cwd.join(".dsh/skills/snapshot-skill");
    assert_eq!(
        render_value(&value),
        format!(
            "<skill_content name=\"snapshot-skill\">\n<skill_resources>\nBase directory for this skill: {}\nResolve relative paths mentioned by this skill against the base directory before using them. Load referenced resources only as needed.\n</skill_resources>\n\n<skill_instructions>\nFollow these snapshot-only instructions.\nResolve referenced resources relative to this skill directory.\n</skill_instructions>\n</skill_content>",
            base.display()
        )
    );
    assert_eq!(value["provider"], "filesystem");
    // The body is re-read on every load and inserted unescaped.
    write(
        cwd,
        ".dsh/skills/snapshot-skill/SKILL.md",
        "---\nname: snapshot-skill\ndescription: d\n---\nuse <tags> & more\n",
    );
    let value = load(&no_homes(), cwd, "snapshot-skill").unwrap();
    assert_eq!(value["content"], "use <tags> & more");
}

#[test]
fn load_errors_have_the_exact_texts() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    write(
        cwd,
        ".dsh/skills/user-only/SKILL.md",
        &skill_md("user-only", "d", "disable-model-invocation: true\n", "b"),
    );
    let message = |name: &str| {
        load(&no_homes(), cwd, name)
            .unwrap_err()
            .to_failure()
            .message
    };
    assert_eq!(message("Bad Name"), "invalid skill name \"Bad Name\"");
    assert_eq!(
        message("missing"),
        "skill \"missing\" is unknown or no longer available"
    );
    assert_eq!(
        message("user-only"),
        "skill \"user-only\" is not available for model invocation"
    );
}

fn skill(name: &str, description: &str, model_invocable: bool) -> Skill {
    Skill {
        name: name.to_owned(),
        description: description.to_owned(),
        when_to_use: None,
        model_invocable,
        user_invocable: true,
        file: PathBuf::from("/x/SKILL.md"),
        base_dir: PathBuf::from("/x"),
    }
}

#[test]
fn descriptions_are_collapsed_capped_and_escaped() {
    assert_eq!(catalog_description("  a \n b\tc ", 500), "a b c");
    assert_eq!(catalog_description("abcdefgh", 6), "abc...");
    assert_eq!(catalog_description("abcdef", 6), "abcdef");
    let text = catalog_text(&entries(&[skill("x", "a<b & c", true)], 500), false);
    assert!(text.contains("- `x`: a&lt;b &amp; c\n"), "{text}");
}

#[test]
fn the_first_catalog_matches_the_recording() {
    let skills = vec![
        skill(
            "model-only-skill",
            "Prove user-disabled skills remain available to the model.",
            true,
        ),
        skill(
            "snapshot-skill",
            "Exercise project skill discovery and loading in snapshot tests.",
            true,
        ),
        skill(
            "user-only-skill",
            "Prove model-disabled skills stay outside the model catalog.",
            false,
        ),
    ];
    let message = catalog_message(&skills, &[], &[], DESCRIPTION_MAX_LENGTH).unwrap();
    assert_eq!(
        text_of(&message.content),
        "<system-reminder>\nA skill is a reusable set of task-specific instructions. The following skills are available in this session:\n\n<available_skills>\n- `model-only-skill`: Prove user-disabled skills remain available to the model.\n- `snapshot-skill`: Exercise project skill discovery and loading in snapshot tests.\n</available_skills>\n\nIf the user names a skill, or the task clearly matches a skill's description, call the `skill` tool with the exact skill name before taking task actions. Load all applicable skills, then follow their full instructions. This catalog contains summaries only; do not infer or follow a skill's instructions until it has been loaded.\nA user may also invoke a skill directly; its <skill_content> block then appears in this conversation. Follow it, and do not call the `skill` tool again for that skill.\n</system-reminder>"
    );
    assert_eq!(
        serde_json::to_value(message.source.as_map()).unwrap(),
        serde_json::json!({
            "kind": "skill-catalog",
            "form": "catalog",
            "entries": [
                {"name": "model-only-skill", "description": "Prove user-disabled skills remain available to the model."},
                {"name": "snapshot-skill", "description": "Exercise project skill discovery and loading in snapshot tests."}
            ]
        })
    );

    // Unchanged: nothing; changed: a full replacement; emptied: the empty replacement.
    let history = vec![Arc::new(message)];
    assert_eq!(catalog_message(&skills, &history, &[], 500), None);
    let fewer = &skills[1..];
    let update = catalog_message(fewer, &history, &[], 500).unwrap();
    assert!(text_of(&update.content).contains("The available skill catalog changed."));
    assert_eq!(update.source.get("update").unwrap(), "replace");
    let history = vec![history[0].clone(), Arc::new(update)];
    assert_eq!(catalog_message(fewer, &history, &[], 500), None);
    let empty = catalog_message(&[], &history, &[], 500).unwrap();
    assert_eq!(empty.source.get("update").unwrap(), "empty");
    assert!(text_of(&empty.content).contains("no skills are available"));
    let history = vec![Arc::new(empty)];
    assert_eq!(catalog_message(&[], &history, &[], 500), None);
    // Never published and nothing to publish: no catalog at all.
    assert_eq!(
        catalog_message(&[], &[], &[Message::user_text("hi")], 500),
        None
    );
}

mod through_the_registry {
    use dsh_tools::CancellationToken;
    use dsh_tools::RegistryConfig;
    use dsh_tools::ToolCallInput;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    #[tokio::test]
    async fn the_tool_resolves_the_cwd_and_reports_plain_errors() {
        let tmp = tempfile::tempdir().unwrap();
        let cwd = tmp.path().to_path_buf();
        write(
            &cwd,
            ".dsh/skills/snapshot-skill/SKILL.md",
            &skill_md("snapshot-skill", "d", "", "Do the thing."),
        );
        let root = Scope::root();
        let registry = ToolRegistry::new(RegistryConfig::default());
        let resolved = cwd.clone();
        let resolver: CwdResolver = Arc::new(move |_run: &ToolRun| Ok(resolved.clone()));
        register(&registry, &root, no_homes(), resolver).unwrap();
        let call = |args: serde_json::Value| {
            let registry = registry.clone();
            async move {
                let input = ToolCallInput::new("c1", NAME, args, CancellationToken::new());
                let result = registry.execute(input).await;
                (result.is_error, text_of(&result.content))
            }
        };
        let (is_error, text) = call(json!({"name": "snapshot-skill"})).await;
        assert!(!is_error, "{text}");
        assert!(text.starts_with("<skill_content name=\"snapshot-skill\">\n<skill_resources>\nBase directory for this skill: "));
        assert!(text.ends_with(
            "<skill_instructions>\nDo the thing.\n</skill_instructions>\n</skill_content>"
        ));
        assert_eq!(
            call(json!({"name": "nope"})).await,
            (
                true,
                "Error: skill \"nope\" is unknown or no longer available".to_owned()
            )
        );
        let definition = registry.get(NAME, None).unwrap();
        assert_eq!(
            definition.present_call(&json!({"name": "snapshot-skill"})),
            Some(
                ToolCallView::generic("Load skill snapshot-skill")
                    .kind(ToolCallKind::Read)
                    .raw_input(json!("snapshot-skill"))
            )
        );
    }
}

#[test]
fn the_user_gesture_loads_user_invocable_skills_only() {
    use super::invocation::*;
    assert_eq!(
        invoked_names("please /a-b then/x /c /a-b /Bad"),
        vec!["a-b".to_owned(), "c".to_owned()]
    );
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    write(
        cwd,
        ".dsh/skills/both/SKILL.md",
        &skill_md("both", "d", "", "Both body."),
    );
    write(
        cwd,
        ".dsh/skills/model-only/SKILL.md",
        &skill_md("model-only", "d", "user-invocable: false\n", "m"),
    );
    let claimed = vec![
        Message::user_text("run /model-only and /both"),
        Message::user(
            vec![dsh_protocol::ContentBlock::text("/both")],
            dsh_protocol::MessageSource::plugin("x"),
        ),
    ];
    let messages = invocation_messages(&no_homes(), cwd, &claimed);
    assert_eq!(messages.len(), 1);
    assert_eq!(
        serde_json::to_value(messages[0].source.as_map()).unwrap(),
        serde_json::json!({"kind": "skill-invocation", "name": "both", "form": "instructions"})
    );
    let text = text_of(&messages[0].content);
    assert!(text.starts_with("<skill_content name=\"both\">"), "{text}");
    assert!(text.contains("\n<skill_instructions>\nBoth body.\n</skill_instructions>"));
}
