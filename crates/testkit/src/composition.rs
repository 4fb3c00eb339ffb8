//! Translates a scenario's recorded composition into dsh configuration.
//!
//! The recorded runs used upstream composition files (`upstream.config_files`): the snapshot
//! harness ran `danger-full-access` unless `DSH_PERMISSION_MODE` said otherwise, the `fs`
//! overlay spilled results over 800 bytes under a fixed root, the fs-search composition
//! sampled glob results over a cap of 4, and so on. dsh reaches the same behaviour through its
//! own settings, which the runner writes to `$DSH_HOME/config.toml` (the user layer, so the
//! scenario's environment still wins).

use std::fmt::Write;
use std::path::Path;

use serde_json::Value;

use crate::scenario::ScenarioSpec;

/// The `config.toml` for one scenario run.
pub fn config_toml(spec: &ScenarioSpec, home: &Path) -> String {
    let files: Vec<&str> = spec
        .upstream
        .get("config_files")
        .and_then(Value::as_array)
        .map(|files| files.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let uses = |name: &str| files.iter().any(|file| file.ends_with(name));
    let mut toml =
        String::from("# written by dsh-conformance from the scenario's recorded composition\n");
    toml.push_str("[plugins.sandbox]\nmode = \"danger-full-access\"\n\n");
    if uses("/fs.cordis.yml") {
        let root = spec
            .spill_root
            .clone()
            .unwrap_or_else(|| home.join("spill").to_string_lossy().into_owned());
        let _ = write!(
            toml,
            "[plugins.spill]\nmax_inline_bytes = 800\nroot = {}\n\n",
            quote(&root)
        );
    } else {
        // Without the fs overlay the recorded compositions had no spill store at all.
        toml.push_str("[plugins.spill]\nenabled = false\n\n");
    }
    if uses("/fs-search.cordis.yml") {
        toml.push_str("[plugins.fs]\nglob_sampling = true\nglob_max_results = 4\n\n");
    }
    if uses("/image.cordis.yml") {
        // The image overlay mounts the local attachment store; its replay catalog declares
        // the vision model (selected) as text+image and the others as text-only.
        toml.push_str(concat!(
            "[model]\nname = \"deepseek-v4-flash-vision-exp\"\n\n",
            "[[model.catalog]]\nid = \"deepseek-v4-flash\"\ninput = [\"text\"]\n\n",
            "[[model.catalog]]\nid = \"deepseek-v4-pro\"\ninput = [\"text\"]\n\n",
            "[[model.catalog]]\nid = \"deepseek-v4-flash-vision-exp\"\ninput = [\"text\", \"image\"]\n\n",
        ));
    } else {
        // Without the overlay there was no attachment store, so no `read_image` either.
        toml.push_str("[plugins.attachments]\nenabled = false\n\n");
    }
    if uses("acp-agent/cordis.yml") {
        // The base composition mounts both hook bridges on launch-cwd files; a scenario
        // without them in its workspace has no hooks.
        toml.push_str(concat!(
            "[plugins.hooks-claude-code]\nconfig_path = \"hooks.json\"\n\n",
            "[plugins.hooks-codex]\nconfig_path = \"codex-hooks.json\"\n\n",
        ));
    }
    // Goals, plan mode, `ask_user_question` and the repeat-tool reminder are on in dsh by
    // default (docs/steering.md); the recorded compositions mounted each only in its overlay.
    let overlay = |needles: &[&str]| {
        files
            .iter()
            .any(|file| needles.iter().any(|needle| file.contains(needle)))
    };
    for (plugin, needles) in [
        ("goal", &["/goal."][..]),
        ("plan-mode", &["plan-mode", "/plan."][..]),
        ("ask-user", &["ask-user", "user-question"][..]),
        ("repeat-tool-reminder", &["repeat-tool", "/guard."][..]),
    ] {
        let enabled = overlay(needles);
        let _ = write!(toml, "[plugins.{plugin}]\nenabled = {enabled}\n\n");
    }
    if uses("/session-title.cordis.yml") {
        // The overlay's LLM title provider capped the title reply at 32 output tokens.
        toml.push_str("[plugins.session-title]\nmax_tokens = 32\n\n");
    } else {
        // The other compositions had no LLM title provider (and no title route to replay).
        toml.push_str("[plugins.session-title]\nenabled = false\n\n");
    }
    // Issue #17 capabilities: an overlay (or a feature tag) that composes them.
    let features: Vec<&str> = spec.features.iter().map(String::as_str).collect();
    let overlay = |words: &[&str]| {
        files
            .iter()
            .any(|file| words.iter().any(|word| file.contains(word)))
    };
    if features.contains(&"web-fetch") {
        // The recorded fetches go to the scenario's own loopback fixture servers, which
        // `web_fetch` reaches only when the person allows them.
        toml.push_str("[plugins.web]\nallow_hosts = [\"127.0.0.1\"]\n\n");
    }
    if features.contains(&"pty") || overlay(&["terminal", "pty"]) {
        toml.push_str("[plugins.terminal]\nenabled = true\n\n");
    }
    if features.contains(&"session-query") || overlay(&["session-query"]) {
        toml.push_str("[plugins.session-query]\nenabled = true\n\n[plugins.session-query.index]\nopen_at = \"startup\"\n\n");
    }
    if features.contains(&"lsp") || overlay(&["lsp"]) {
        // The language servers `.ci/run` installs under tests/lsp-servers.
        let bin = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/lsp-servers/node_modules/.bin/"
        );
        let _ = write!(
            toml,
            concat!(
                "[plugins.lsp]\nenabled = true\n\n",
                "[plugins.lsp.servers.typescript]\ncommand = {ts}\nargs = [\"--stdio\"]\n",
                "extension_to_language = {{ \".ts\" = \"typescript\", \".tsx\" = \"typescriptreact\", \".js\" = \"javascript\", \".jsx\" = \"javascriptreact\" }}\n\n",
                "[plugins.lsp.servers.python]\ncommand = {py}\nargs = [\"--stdio\"]\n",
                "extension_to_language = {{ \".py\" = \"python\" }}\n\n",
            ),
            ts = quote(&format!("{bin}typescript-language-server")),
            py = quote(&format!("{bin}pyright-langserver")),
        );
    }
    if overlay(&["bash-persistent", "persistent-bash"]) {
        toml.push_str("[plugins.bash-persistent]\nenabled = true\n\n");
    }
    if uses("headless-agent/compaction.cordis.snapshot.yml") {
        // The keyless overflow composition: a 128 000-token catalog window, threshold 0.99,
        // 20 retained tokens, summaries capped at 32 tokens.
        toml.push_str(concat!(
            "[plugins.compaction]\nthreshold_ratio = 0.99\nretain_tokens = 20\nmax_tokens = 32\n\n",
            "[[model.catalog]]\nid = \"deepseek-v4-flash\"\ncontext_window = 128000\n\n",
        ));
    }
    if uses("acp-agent/agent-instructions.cordis.snapshot.yml") {
        // Discovery rooted at the scenario's `.dsh-project` marker; the user-global file is
        // looked up in the run's (empty) dsh home.
        toml.push_str(
            "[plugins.workspace-instructions]\nmax_bytes = 65536\nproject_root_markers = [\".dsh-project\"]\n\n",
        );
    }
    // A recorded `fixture_plugins` entry turns on the test-only plugin of that name (built
    // into the test `dsh` only: `dsh-test-fixtures`); the loopback web fixture is an aux server.
    for fixture in &spec.fixture_plugins {
        match crate::runner::fixture_name(fixture) {
            "workspace-context-compaction" => toml.push_str(
                "[plugins.workspace-context-compaction-fixture]\nenabled = true\nread_path = \"nested/task.txt\"\n\n",
            ),
            "subagent-report-fence" => {
                toml.push_str("[plugins.subagent-report-fence]\nenabled = true\n\n");
            }
            _ => {}
        }
    }
    if let Some(mode) = spec.mode.as_deref().filter(|mode| *mode != "native") {
        let _ = write!(toml, "[tools]\nmode = {}\n\n", quote(mode));
    }
    toml
}

fn quote(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: Value) -> ScenarioSpec {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn the_fs_overlay_spills_at_800_bytes_under_the_recorded_root() {
        let spec = spec(serde_json::json!({
            "suite": "acp", "name": "bash-spill", "spill_root": "/tmp/dsh-acp-snap-ee77dff02",
            "upstream": {"config_files": ["examples/acp-agent/fs.cordis.yml", "examples/acp-agent/cordis.yml"]}
        }));
        let toml = config_toml(&spec, Path::new("/h"));
        assert!(
            toml.contains(
                "[plugins.spill]\nmax_inline_bytes = 800\nroot = \"/tmp/dsh-acp-snap-ee77dff02\""
            ),
            "{toml}"
        );
        assert!(toml.contains("mode = \"danger-full-access\""));
    }

    #[test]
    fn steering_plugins_on_by_default_are_mounted_only_by_their_overlays() {
        let enabled = |files: Value| {
            let spec = spec(serde_json::json!({"suite": "headless", "name": "g",
                "upstream": {"config_files": files}}));
            let parsed: toml::Table = toml::from_str(&config_toml(&spec, Path::new("/h"))).unwrap();
            ["goal", "plan-mode", "ask-user", "repeat-tool-reminder"]
                .map(|name| parsed["plugins"][name]["enabled"].as_bool().unwrap())
        };
        assert_eq!(
            enabled(serde_json::json!(["examples/headless-agent/cordis.yml"])),
            [false; 4]
        );
        assert_eq!(
            enabled(serde_json::json!([
                "examples/headless-agent/goal.cordis.snapshot.yml",
                "examples/headless-agent/cordis.yml"
            ])),
            [true, false, false, false]
        );
        assert_eq!(
            enabled(serde_json::json!([
                "examples/acp-agent/ask-user.cordis.yml"
            ])),
            [false, false, true, false]
        );
    }

    #[test]
    fn the_base_composition_does_not_spill_and_search_samples() {
        let base = spec(
            serde_json::json!({"suite": "acp", "name": "x", "upstream": {"config_files": ["examples/acp-agent/cordis.yml"]}}),
        );
        let base = config_toml(&base, Path::new("/h"));
        assert!(base.contains("[plugins.spill]\nenabled = false"));
        assert!(base.contains("[plugins.session-title]\nenabled = false"));
        let titled = spec(
            serde_json::json!({"suite": "acp", "name": "t", "upstream": {"config_files": [
            "examples/acp-agent/session-title.cordis.yml", "examples/acp-agent/cordis.yml"]}}),
        );
        let titled = config_toml(&titled, Path::new("/h"));
        assert!(titled.contains("[plugins.session-title]\nmax_tokens = 32"));
        let parsed: toml::Table = toml::from_str(&base).unwrap();
        let plugins = &parsed["plugins"];
        assert_eq!(
            plugins["hooks-claude-code"]["config_path"].as_str(),
            Some("hooks.json")
        );
        assert_eq!(
            plugins["hooks-codex"]["config_path"].as_str(),
            Some("codex-hooks.json")
        );
        let search = spec(
            serde_json::json!({"suite": "acp", "name": "y", "mode": "code",
            "upstream": {"config_files": ["examples/acp-agent/tests/fs-search.cordis.yml"]}}),
        );
        let toml = config_toml(&search, Path::new("/h"));
        assert!(toml.contains("glob_max_results = 4"));
        assert!(toml.contains("[tools]\nmode = \"code\""));
        assert!(toml.contains("[plugins.attachments]\nenabled = false"));
    }

    #[test]
    fn issue_17_features_compose_their_plugins() {
        let spec = spec(serde_json::json!({
            "suite": "acp", "name": "lsp-hover", "features": ["lsp", "pty", "session-query"],
            "upstream": {"config_files": ["examples/acp-agent/cordis.yml"]}
        }));
        let text = config_toml(&spec, Path::new("/h"));
        let parsed: toml::Table = toml::from_str(&text).unwrap();
        let plugins = &parsed["plugins"];
        assert_eq!(plugins["terminal"]["enabled"].as_bool(), Some(true));
        assert_eq!(
            plugins["session-query"]["index"]["open_at"].as_str(),
            Some("startup")
        );
        let servers = &plugins["lsp"]["servers"];
        assert!(
            servers["typescript"]["command"]
                .as_str()
                .unwrap()
                .ends_with("typescript-language-server")
        );
        assert_eq!(
            servers["python"]["extension_to_language"][".py"].as_str(),
            Some("python")
        );
    }

    #[test]
    fn context_overlays_configure_compaction_instructions_and_the_fixture() {
        let recovery = spec(serde_json::json!({
            "suite": "headless", "name": "compaction-recovery",
            "upstream": {"config_files": ["examples/headless-agent/compaction.cordis.snapshot.yml",
                "examples/headless-agent/cordis.yml"]}
        }));
        let parsed: toml::Table = toml::from_str(&config_toml(&recovery, Path::new("/h"))).unwrap();
        assert_eq!(
            parsed["plugins"]["compaction"]["retain_tokens"].as_integer(),
            Some(20)
        );
        assert_eq!(
            parsed["model"]["catalog"][0]["context_window"].as_integer(),
            Some(128_000)
        );
        let instructions = spec(serde_json::json!({
            "suite": "acp", "name": "agent-instructions",
            "fixture_plugins": ["workspace-context-compaction (replaces the instruction baseline after the first nested read)"],
            "upstream": {"config_files": ["examples/acp-agent/agent-instructions.cordis.yml",
                "examples/acp-agent/agent-instructions.cordis.snapshot.yml", "examples/acp-agent/cordis.yml"]}
        }));
        let parsed: toml::Table =
            toml::from_str(&config_toml(&instructions, Path::new("/h"))).unwrap();
        let plugins = &parsed["plugins"];
        assert_eq!(
            plugins["workspace-instructions"]["project_root_markers"][0].as_str(),
            Some(".dsh-project")
        );
        assert_eq!(
            plugins["workspace-context-compaction-fixture"]["enabled"].as_bool(),
            Some(true)
        );
    }

    #[test]
    fn each_fixture_plugin_entry_turns_on_its_plugin_by_configuration() {
        let report = spec(serde_json::json!({
            "suite": "acp", "name": "subagent-report",
            "fixture_plugins": ["subagent-report-fence (orders report/settlement against the parent turns)"]
        }));
        let parsed: toml::Table = toml::from_str(&config_toml(&report, Path::new("/h"))).unwrap();
        assert_eq!(
            parsed["plugins"]["subagent-report-fence"]["enabled"].as_bool(),
            Some(true)
        );
        // The loopback web page is an aux server, not a plugin: no table for it.
        let web = spec(serde_json::json!({
            "suite": "acp", "name": "web-fetch",
            "fixture_plugins": ["web-fetch-fixture-server (loopback HTTP page on 127.0.0.1:43117)"]
        }));
        let parsed: toml::Table = toml::from_str(&config_toml(&web, Path::new("/h"))).unwrap();
        let plugins = parsed.get("plugins").and_then(toml::Value::as_table);
        assert!(plugins.is_none_or(|p| !p.keys().any(|k| k.contains("fixture"))));
    }

    #[test]
    fn the_image_overlay_selects_the_vision_model_with_image_input() {
        let spec = spec(serde_json::json!({
            "suite": "acp", "name": "read-image",
            "upstream": {"config_files": ["examples/acp-agent/image.cordis.yml",
                "examples/acp-agent/image.cordis.snapshot.yml", "examples/acp-agent/cordis.yml"]}
        }));
        let text = config_toml(&spec, Path::new("/h"));
        let parsed: toml::Table = toml::from_str(&text).unwrap();
        let model = &parsed["model"];
        assert_eq!(model["name"].as_str(), Some("deepseek-v4-flash-vision-exp"));
        let catalog = model["catalog"].as_array().unwrap();
        let vision = catalog
            .iter()
            .find(|e| e["id"].as_str() == Some("deepseek-v4-flash-vision-exp"))
            .unwrap();
        assert_eq!(vision["input"].as_array().unwrap().len(), 2);
        assert_eq!(catalog.len(), 3);
        assert!(!text.contains("[plugins.attachments]"));
    }
}
