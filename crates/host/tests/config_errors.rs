//! Configuration errors, one test per class: each names the file, the line and the key.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::path::PathBuf;

use std::sync::Arc;

use dsh_host::Config;
use dsh_host::ConfigErrors;
use dsh_host::Host;
use dsh_host::HostError;
use dsh_host::HostOptions;
use dsh_host::Overrides;
use dsh_session::MemoryStore;

struct Files {
    _dir: tempfile::TempDir,
    home: PathBuf,
    cwd: PathBuf,
}

impl Files {
    fn user(text: &str) -> Self {
        let files = Self::empty();
        std::fs::write(files.home.join("config.toml"), text).unwrap();
        files
    }

    fn empty() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let cwd = dir.path().join("project");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(cwd.join(".dsh")).unwrap();
        Self {
            _dir: dir,
            home,
            cwd,
        }
    }

    fn user_file(&self) -> PathBuf {
        self.home.join("config.toml")
    }

    fn errors(&self, overrides: &Overrides) -> ConfigErrors {
        let config = match Config::load_in(self.home.clone(), &self.cwd, overrides) {
            Ok(config) => config,
            Err(errors) => return errors,
        };
        match dsh_host::check(&config, &dsh_host::builtin_plugins()) {
            Ok(_) => panic!("the configuration was accepted"),
            Err(errors) => errors,
        }
    }
}

/// Exactly one error, at `file:line`, about `key`, whose message contains `message`.
fn expect(errors: &ConfigErrors, file: &Path, line: usize, key: &str, message: &str) {
    assert_eq!(errors.0.len(), 1, "{errors}");
    let error = &errors.0[0];
    assert_eq!(error.file.as_deref(), Some(file), "{error}");
    assert_eq!(error.line, Some(line), "{error}");
    assert_eq!(error.key, key, "{error}");
    assert!(error.message.contains(message), "{error}");
    let text = error.to_string();
    assert!(
        text.starts_with(&format!("{}:{line}: {key}: ", file.display())),
        "{text}"
    );
}

#[test]
fn an_unknown_top_level_table() {
    let files = Files::user("[model]\nname = \"deepseek-v4-pro\"\n\n[modle]\nname = \"x\"\n");
    expect(
        &files.errors(&Overrides::default()),
        &files.user_file(),
        4,
        "modle",
        "unknown table",
    );
}

#[test]
fn an_unknown_plugin() {
    let files =
        Files::user("[plugins.bash]\ntimeout_ms = 1000\n\n[plugins.nosuch]\nenabled = true\n");
    expect(
        &files.errors(&Overrides::default()),
        &files.user_file(),
        4,
        "plugins.nosuch",
        "unknown plugin",
    );
}

#[test]
fn an_unknown_key_in_a_core_table() {
    let files = Files::user("[model]\nnmae = \"x\"\n");
    expect(
        &files.errors(&Overrides::default()),
        &files.user_file(),
        2,
        "model.nmae",
        "unknown field `nmae`",
    );
}

#[test]
fn an_unknown_key_in_a_plugin_table() {
    let files = Files::user("# bash\n[plugins.bash]\ntimeout_ms = 1000\ntimout = 5\n");
    expect(
        &files.errors(&Overrides::default()),
        &files.user_file(),
        4,
        "plugins.bash.timout",
        "unknown field `timout`",
    );
}

#[test]
fn every_plugin_table_is_parsed_even_when_disabled() {
    for name in [
        "web",
        "code",
        "mcp",
        "skill",
        "attachments",
        "jobs",
        "fallback-title",
    ] {
        let files = Files::user(&format!("[plugins.{name}]\nenabled = false\nnosuch = 1\n"));
        expect(
            &files.errors(&Overrides::default()),
            &files.user_file(),
            3,
            &format!("plugins.{name}.nosuch"),
            "unknown field `nosuch`",
        );
    }
}

#[test]
fn a_mistyped_value() {
    let files = Files::user("[plugins.bash]\ntimeout_ms = \"soon\"\n");
    expect(
        &files.errors(&Overrides::default()),
        &files.user_file(),
        2,
        "plugins.bash.timeout_ms",
        "invalid type",
    );
}

#[test]
fn an_unknown_enum_value() {
    let files = Files::user("[plugins.sandbox]\nmode = \"yolo\"\n");
    expect(
        &files.errors(&Overrides::default()),
        &files.user_file(),
        2,
        "plugins.sandbox.mode",
        "unknown variant `yolo`",
    );
}

#[test]
fn an_enabled_that_is_not_a_bool() {
    let files = Files::user("[plugins.web]\nenabled = \"yes\"\n");
    expect(
        &files.errors(&Overrides::default()),
        &files.user_file(),
        2,
        "plugins.web.enabled",
        "must be true or false",
    );
}

#[test]
fn a_syntax_error() {
    let files = Files::user("[model]\nname = \"unterminated\n");
    let errors = files.errors(&Overrides::default());
    assert_eq!(errors.0.len(), 1, "{errors}");
    let error = &errors.0[0];
    assert_eq!(error.file.as_deref(), Some(files.user_file().as_path()));
    assert_eq!(error.line, Some(2), "{error}");
    assert!(error.message.contains("not valid TOML"), "{error}");
    let text = error.to_string();
    assert!(
        text.starts_with(&format!("{}:2: ", files.user_file().display())),
        "{text}"
    );
}

#[test]
fn an_unknown_key_in_an_mcp_server_row() {
    let files = Files::user(
        "[[mcp.servers]]\nname = \"a\"\ncommand = \"true\"\n\n[[mcp.servers]]\nname = \"b\"\ncomand = \"x\"\n",
    );
    // The second row's own line: the row index is part of the key.
    expect(
        &files.errors(&Overrides::default()),
        &files.user_file(),
        7,
        "mcp.servers.1.comand",
        "unknown field `comand`",
    );
}

/// A value the plugin's own checks refuse when it mounts: the host does not start, and the
/// error is located like a parse error (the field when the plugin names it, else its table).
#[tokio::test]
async fn a_value_a_plugin_refuses_when_it_mounts() {
    for (text, line, key, message) in [
        (
            "[plugins.goal]\nblocked_after_consecutive_rounds = 0\n",
            1,
            "plugins.goal",
            "goal: blocked_after_consecutive_rounds must be a positive safe integer",
        ),
        (
            "# children\n[plugins.subagents]\nmax_parallel_tool_calls = 0\n",
            3,
            "plugins.subagents.max_parallel_tool_calls",
            "must be at least 1",
        ),
    ] {
        let files = Files::user(text);
        let config = Config::load_in(files.home.clone(), &files.cwd, &Overrides::default())
            .expect("the layers parse");
        let mut options = HostOptions::new(config);
        options.store = Some(Arc::new(MemoryStore::new()));
        let errors = match Host::build(options) {
            Err(HostError::Config(errors)) => errors,
            Err(other) => panic!("{key}: not a located error: {other}"),
            Ok(_) => panic!("{key}: the host started"),
        };
        expect(&errors, &files.user_file(), line, key, message);
        // Said once: the text is not repeated down the error chain.
        let text = errors.to_string();
        assert_eq!(text.matches(message).count(), 1, "{text}");
        assert!(std::error::Error::source(&errors).is_none(), "{text}");
    }
}

#[test]
fn an_unknown_provider() {
    let files = Files::user("[model]\nprovider = \"nosuch\"\n");
    expect(
        &files.errors(&Overrides::default()),
        &files.user_file(),
        2,
        "model.provider",
        "unknown provider",
    );
}

#[test]
fn a_trusted_project_layer_is_located_in_the_project_file() {
    let files = Files::empty();
    let project = files.cwd.join(".dsh/config.toml");
    std::fs::write(&project, "[tools]\nmode = \"native\"\nmax_paralel = 2\n").unwrap();
    let overrides = Overrides {
        trust_project: true,
        ..Overrides::default()
    };
    expect(
        &files.errors(&overrides),
        &project,
        3,
        "tools.max_paralel",
        "unknown field",
    );
}

#[test]
fn a_command_line_override_is_named_without_a_file() {
    let files = Files::empty();
    let mut overrides = Overrides::default();
    overrides.set("plugins.bash.timeout_ms", "soon");
    let errors = files.errors(&overrides);
    let error = &errors.0[0];
    assert_eq!(error.file, None);
    assert_eq!(error.key, "plugins.bash.timeout_ms");
    assert!(
        error.to_string().starts_with("plugins.bash.timeout_ms: "),
        "{error}"
    );
}

#[test]
fn all_problems_are_reported_at_once() {
    let files = Files::user("[modle]\n\n[plugins.nosuch]\n\n[model]\nnmae = 1\n");
    let errors = files.errors(&Overrides::default());
    let keys: Vec<&str> = errors.0.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(keys, ["modle", "plugins.nosuch", "model.nmae"], "{errors}");
}
