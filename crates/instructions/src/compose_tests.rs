use std::path::Path;
use std::path::PathBuf;
use std::sync::Mutex;

use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;
use crate::config::Environment;
use crate::fs::LocalFs;
use crate::render::COMPACT_INTRO;

struct Workspace {
    _dir: tempfile::TempDir,
    home: PathBuf,
    root: PathBuf,
}

impl Workspace {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home/.dsh");
        let root = dir.path().join("repo");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::write(root.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        Self {
            _dir: dir,
            home,
            root,
        }
    }

    fn write(&self, path: &str, text: &str) {
        let path = self.root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn config(&self, extra: serde_json::Value) -> InstructionsConfig {
        let mut value = json!({"maxBytes": 65536, "dshHome": self.home.to_string_lossy()});
        for (k, v) in extra.as_object().unwrap() {
            value[k] = v.clone();
        }
        InstructionsConfig::parse(&value, &Environment::default()).unwrap()
    }
}

fn text(message: &Message) -> Vec<String> {
    message
        .content
        .iter()
        .map(|b| match b {
            ContentBlock::Text { text } => text.clone(),
            _ => String::new(),
        })
        .collect()
}

fn changes(message: &Message) -> Vec<(String, String, String)> {
    changes_of(message)
        .into_iter()
        .map(|c| (c.action.as_str().to_owned(), c.scope, c.path))
        .collect()
}

#[test]
fn a_root_agents_file_makes_a_baseline_with_its_digest() {
    // Checklist A1, A2, A10.
    let ws = Workspace::new();
    ws.write("AGENTS.md", "Root rule.\n");
    let config = ws.config(json!({}));
    let composer = Composer::new(&config, &LocalFs, &ws.root);
    let mut cache = Cache::new();
    let message = composer.compose(&mut cache, &[], &[], &[], false).unwrap();
    assert_eq!(
        text(&message),
        [format!(
            "<system-reminder>\n{INTRO}\n\nInstructions from: AGENTS.md\n\nRoot rule.\n\n</system-reminder>"
        )]
    );
    let source = serde_json::to_value(&message.source).unwrap();
    assert_eq!(
        source,
        json!({
            "kind": "agent-instructions",
            "form": "instructions",
            "baseline": true,
            "baselineIdentity": config.identity(&ws.root, &ws.root),
            "changes": [{"action": "set", "scope": ".\u{0}AGENTS.md", "path": "AGENTS.md",
                         "digest": sha1_hex("Root rule.\n")}]
        })
    );
}

#[test]
fn the_global_file_comes_first_with_its_display_path() {
    // Checklist A3.
    let ws = Workspace::new();
    std::fs::write(ws.home.join("AGENTS.md"), "Global rule.").unwrap();
    ws.write("AGENTS.md", "Root rule.");
    let config = ws.config(json!({}));
    let message = Composer::new(&config, &LocalFs, &ws.root)
        .compose(&mut Cache::new(), &[], &[], &[], false)
        .unwrap();
    let body = &text(&message)[0];
    let global = body
        .find("Instructions from: $DSH_HOME/AGENTS.md\n\nGlobal rule.")
        .unwrap();
    let root = body
        .find("Instructions from: AGENTS.md\n\nRoot rule.")
        .unwrap();
    assert!(global < root);
    assert_eq!(changes(&message)[0].1, "user-global\u{0}AGENTS.md");
    // The default home shows as ~/.dsh.
    let default = InstructionsConfig::parse(
        &json!({"maxBytes": 65536}),
        &Environment {
            dsh_home: None,
            home: Some(ws.home.parent().unwrap().to_path_buf()),
        },
    )
    .unwrap();
    assert_eq!(default.dsh_home.global_display(), "~/.dsh/AGENTS.md");
    let message = Composer::new(&default, &LocalFs, &ws.root)
        .compose(&mut Cache::new(), &[], &[], &[], false)
        .unwrap();
    assert!(text(&message)[0].contains("Instructions from: ~/.dsh/AGENTS.md\n\nGlobal rule."));
}

#[test]
fn chain_order_overlays_and_per_directory_dedup() {
    // Checklist A4, A5.
    let ws = Workspace::new();
    ws.write("AGENTS.md", "same\n");
    ws.write("CLAUDE.md", "  same  ");
    ws.write("AGENTS.local.md", "local root");
    ws.write("app/AGENTS.md", "same\n");
    ws.write("app/CLAUDE.local.md", "local app");
    let config = ws.config(json!({}));
    let message = Composer::new(&config, &LocalFs, &ws.root.join("app"))
        .compose(&mut Cache::new(), &[], &[], &[], false)
        .unwrap();
    let paths: Vec<String> = changes(&message).into_iter().map(|c| c.2).collect();
    assert_eq!(
        paths,
        [
            "AGENTS.md",
            "AGENTS.local.md",
            "app/AGENTS.md",
            "app/CLAUDE.local.md"
        ]
    );
    let body = &text(&message)[0];
    assert!(!body.contains("Instructions from: CLAUDE.md"));
}

#[test]
fn oversized_files_are_ignored_and_no_files_means_no_message() {
    // Checklist A6, A11.
    let ws = Workspace::new();
    let config = ws.config(json!({"maxSourceBytes": 10}));
    let composer = Composer::new(&config, &LocalFs, &ws.root);
    assert_eq!(
        composer.compose(&mut Cache::new(), &[], &[], &[], false),
        None
    );
    ws.write("AGENTS.md", "this is more than ten bytes");
    assert_eq!(
        composer.compose(&mut Cache::new(), &[], &[], &[], false),
        None
    );
    ws.write("CLAUDE.md", "short");
    let message = composer
        .compose(&mut Cache::new(), &[], &[], &[], false)
        .unwrap();
    let body = &text(&message)[0];
    assert!(
        !body.contains("AGENTS.md"),
        "no notice of the ignored file: {body}"
    );
    assert!(!body.contains("budget"));
}

#[test]
fn budget_pressure_drops_broad_files_and_never_exceeds_max_bytes() {
    // Checklist A7, A8.
    let ws = Workspace::new();
    std::fs::write(ws.home.join("AGENTS.md"), "g".repeat(600)).unwrap();
    ws.write("AGENTS.md", &"r".repeat(300));
    let config = ws.config(json!({"maxBytes": 700}));
    let message = Composer::new(&config, &LocalFs, &ws.root)
        .compose(&mut Cache::new(), &[], &[], &[], false)
        .unwrap();
    let body = &text(&message)[0];
    assert!(body.len() <= 700);
    assert!(body.starts_with(
        "<system-reminder>\nWorkspace instruction budget 700 bytes: omitted $DSH_HOME/AGENTS.md"
    ));
    assert_eq!(
        changes(&message).len(),
        1,
        "only represented files are recorded"
    );
    let tight = ws.config(json!({"maxBytes": 330}));
    let message = Composer::new(&tight, &LocalFs, &ws.root)
        .compose(&mut Cache::new(), &[], &[], &[], false)
        .unwrap();
    assert!(text(&message)[0].len() <= 330);
    assert!(text(&message)[0].contains(COMPACT_INTRO));
}

#[test]
fn touches_add_update_and_remove_nested_instructions() {
    // Checklist A13, A14, A15.
    let ws = Workspace::new();
    ws.write("AGENTS.md", "root");
    ws.write("packages/app/AGENTS.md", "app rule");
    let config = ws.config(json!({}));
    let composer = Composer::new(&config, &LocalFs, &ws.root);
    let mut cache = Cache::new();
    let baseline = composer.compose(&mut cache, &[], &[], &[], false).unwrap();
    let touch = [ws.root.join("packages/app/x.ts")];
    let delta = composer
        .compose(&mut cache, &[&baseline], &[], &touch, true)
        .unwrap();
    let body = &text(&delta)[0];
    assert!(body.contains("Additional instructions from: packages/app/AGENTS.md"));
    assert!(body.contains("These instructions apply to work under `packages/app`."));
    assert_eq!(delta.source.get("baseline"), None);
    // Unchanged and visible: nothing.
    assert_eq!(
        composer.compose(&mut cache, &[&baseline, &delta], &[], &touch, true),
        None
    );
    // Edited: updated.
    std::thread::sleep(std::time::Duration::from_millis(10));
    ws.write("packages/app/AGENTS.md", "app rule, edited and longer");
    let updated = composer
        .compose(&mut cache, &[&baseline, &delta], &[], &touch, true)
        .unwrap();
    assert!(text(&updated)[0].contains("Updated instructions from: packages/app/AGENTS.md"));
    assert_eq!(changes(&updated)[0].0, "replace");
    // Deleted: removed.
    std::fs::remove_file(ws.root.join("packages/app/AGENTS.md")).unwrap();
    let removed = composer
        .compose(
            &mut cache,
            &[&baseline, &delta, &updated],
            &[],
            &touch,
            true,
        )
        .unwrap();
    assert!(text(&removed)[0].contains(
        "Instructions removed: packages/app/AGENTS.md\n\nThe previously loaded instructions from this file no longer apply."
    ));
    assert_eq!(
        serde_json::to_value(&removed.source).unwrap()["changes"][0],
        json!({"action": "remove", "scope": "packages/app\u{0}AGENTS.md", "path": "packages/app/AGENTS.md"})
    );
    // A reappearance is loaded again.
    ws.write("packages/app/AGENTS.md", "back");
    let again = composer
        .compose(
            &mut cache,
            &[&baseline, &delta, &updated, &removed],
            &[],
            &touch,
            true,
        )
        .unwrap();
    assert_eq!(changes(&again)[0].0, "set");
    // A touch of the root file itself re-probes the loaded scopes.
    ws.write("AGENTS.md", "root, edited");
    let root = composer
        .compose(
            &mut cache,
            &[&baseline, &delta, &updated, &removed, &again],
            &[],
            &[ws.root.join("AGENTS.md")],
            true,
        )
        .unwrap();
    assert!(text(&root)[0].contains("Updated instructions from: AGENTS.md"));
}

#[test]
fn a_shadowed_baseline_is_recorded_again_with_any_newly_touched_scope() {
    // Checklist A18 and the agent-instructions scenario's step 2 message.
    let ws = Workspace::new();
    ws.write("AGENTS.md", "Root snapshot instruction.\n");
    ws.write("nested/AGENTS.md", "Nested snapshot instruction.\n");
    let config = ws.config(json!({}));
    let composer = Composer::new(&config, &LocalFs, &ws.root);
    let mut cache = Cache::new();
    composer.compose(&mut cache, &[], &[], &[], false).unwrap();
    // The baseline was shadowed: nothing visible; a touch of nested/task.txt.
    let message = composer
        .compose(
            &mut cache,
            &[],
            &[],
            &[ws.root.join("nested/task.txt")],
            true,
        )
        .unwrap();
    assert_eq!(message.content.len(), 2);
    assert!(text(&message)[0].contains("Instructions from: AGENTS.md"));
    assert!(text(&message)[1].starts_with(
        "<system-reminder>\nAdditional instructions from: nested/AGENTS.md\n\nThese instructions apply to work under `nested`."
    ));
    assert_eq!(
        changes(&message),
        [
            ("set".into(), ".\u{0}AGENTS.md".into(), "AGENTS.md".into()),
            (
                "set".into(),
                "nested\u{0}AGENTS.md".into(),
                "nested/AGENTS.md".into()
            ),
        ]
    );
    assert!(baseline_identity(&message).is_some());
    // Entered as authority, it satisfies the next pre-step.
    assert_eq!(
        composer.compose(&mut cache, &[], &[&message], &[], false),
        None
    );
}

#[test]
fn resume_with_unchanged_files_appends_nothing_and_a_changed_config_replaces() {
    // Checklist A19, A20.
    let ws = Workspace::new();
    ws.write("AGENTS.md", "root");
    let config = ws.config(json!({}));
    let baseline = Composer::new(&config, &LocalFs, &ws.root)
        .compose(&mut Cache::new(), &[], &[], &[], false)
        .unwrap();
    // A new process: empty cache, same files.
    assert_eq!(
        Composer::new(&config, &LocalFs, &ws.root).compose(
            &mut Cache::new(),
            &[&baseline],
            &[],
            &[],
            false
        ),
        None
    );
    // Offline edit: one delta.
    ws.write("AGENTS.md", "root, edited offline");
    let delta = Composer::new(&config, &LocalFs, &ws.root)
        .compose(&mut Cache::new(), &[&baseline], &[], &[], false)
        .unwrap();
    assert!(text(&delta)[0].contains("Updated instructions from: AGENTS.md"));
    // Another maxBytes: a complete superseding baseline.
    let other = ws.config(json!({"maxBytes": 32768}));
    let replacement = Composer::new(&other, &LocalFs, &ws.root)
        .compose(&mut Cache::new(), &[&baseline], &[], &[], false)
        .unwrap();
    assert!(text(&replacement)[0].starts_with(
        "<system-reminder>\nThis complete workspace instruction baseline replaces all earlier workspace instruction baselines. The following"
    ));
    // All files gone under a new identity: the explicit empty replacement, with removals.
    std::fs::remove_file(ws.root.join("AGENTS.md")).unwrap();
    let empty = Composer::new(&other, &LocalFs, &ws.root)
        .compose(&mut Cache::new(), &[&baseline], &[], &[], false)
        .unwrap();
    assert_eq!(
        text(&empty),
        [
            "<system-reminder>\nThis complete workspace instruction baseline replaces all earlier workspace instruction baselines. No workspace instructions are currently active.\n</system-reminder>"
        ]
    );
    assert_eq!(
        changes(&empty),
        [(
            "remove".into(),
            ".\u{0}AGENTS.md".into(),
            "AGENTS.md".into()
        )]
    );
}

/// A provider whose probes fail for chosen paths.
struct Flaky {
    failing: Mutex<Vec<PathBuf>>,
}

impl InstructionFs for Flaky {
    fn exists(&self, path: &Path) -> std::io::Result<bool> {
        LocalFs.exists(path)
    }
    fn probe_file(&self, path: &Path) -> Probe {
        if self.failing.lock().unwrap().iter().any(|p| p == path) {
            return Probe::Unavailable("EIO".into());
        }
        LocalFs.probe_file(path)
    }
    fn read(&self, path: &Path, max: u64) -> ReadOutcome {
        LocalFs.read(path, max)
    }
}

#[test]
fn an_unavailable_probe_keeps_the_directory_last_good_and_unreadable_files_are_skipped() {
    let ws = Workspace::new();
    ws.write("AGENTS.md", "root");
    ws.write("app/AGENTS.md", "app");
    let config = ws.config(json!({}));
    let flaky = Flaky {
        failing: Mutex::new(Vec::new()),
    };
    let composer = Composer::new(&config, &flaky, &ws.root);
    let mut cache = Cache::new();
    let baseline = composer.compose(&mut cache, &[], &[], &[], false).unwrap();
    let touch = [ws.root.join("app/x")];
    let delta = composer
        .compose(&mut cache, &[&baseline], &[], &touch, true)
        .unwrap();
    std::fs::remove_file(ws.root.join("app/AGENTS.md")).unwrap();
    flaky
        .failing
        .lock()
        .unwrap()
        .push(ws.root.join("app/AGENTS.md"));
    // The loaded file's probe failed: the app directory keeps its last-good state.
    assert_eq!(
        composer.compose(&mut cache, &[&baseline, &delta], &[], &touch, true),
        None
    );
    flaky.failing.lock().unwrap().clear();
    let removed = composer
        .compose(&mut cache, &[&baseline, &delta], &[], &touch, true)
        .unwrap();
    assert_eq!(changes(&removed)[0].0, "remove");
    // A failing probe of a member that was never loaded freezes nothing.
    ws.write("app/AGENTS.md", "app again");
    flaky
        .failing
        .lock()
        .unwrap()
        .push(ws.root.join("app/CLAUDE.md"));
    let back = composer
        .compose(
            &mut cache,
            &[&baseline, &delta, &removed],
            &[],
            &touch,
            true,
        )
        .unwrap();
    assert_eq!(changes(&back)[0].0, "set");
    // An unreadable (directory-typed) candidate is simply absent.
    std::fs::create_dir_all(ws.root.join("lib/AGENTS.md")).unwrap();
    assert_eq!(
        composer.compose(
            &mut cache,
            &[&baseline, &delta, &removed, &back],
            &[],
            &[ws.root.join("lib/y")],
            true
        ),
        None
    );
}

#[test]
fn merging_keeps_one_pending_message() {
    let a = instruction_message(
        vec!["one".into()],
        Some("id"),
        &[Change {
            action: Action::Set,
            scope: ".\u{0}AGENTS.md".into(),
            path: "AGENTS.md".into(),
            digest: Some("d".into()),
        }],
    );
    let b = instruction_message(
        vec!["two".into()],
        None,
        &[Change {
            action: Action::Remove,
            scope: "x\u{0}AGENTS.md".into(),
            path: "x/AGENTS.md".into(),
            digest: None,
        }],
    );
    let merged = merge(&a, &b);
    assert_eq!(merged.id, a.id);
    assert_eq!(text(&merged), ["one", "two"]);
    assert_eq!(changes(&merged).len(), 2);
    assert!(baseline_identity(&merged).is_some());
}
