//! The `lsp` tool against real language servers (pyright and typescript-language-server, from
//! `npm ci --prefix tests/lsp-servers`), and against servers that are missing, crash or hang.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;

use dsh_kernel::Plugin;
use dsh_kernel::Scope;
use dsh_kernel::ScopeKind;
use dsh_lsp::LspPlugin;
use dsh_protocol::Message;
use dsh_tools::AgentGone;
use dsh_tools::AgentHandle;
use dsh_tools::CancellationToken;
use dsh_tools::RegistryConfig;
use dsh_tools::ToolCallInput;
use dsh_tools::ToolRegistry;
use serde_json::Value;
use serde_json::json;

struct Agent {
    scope: Scope,
}

impl AgentHandle for Agent {
    fn id(&self) -> &str {
        "agent"
    }
    fn scope(&self) -> &Scope {
        &self.scope
    }
    fn inject(&self, _message: Message) -> Result<(), AgentGone> {
        Ok(())
    }
}

fn bin(name: &str) -> Option<PathBuf> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/lsp-servers/node_modules/.bin")
        .join(name);
    if path.exists() {
        Some(path)
    } else {
        eprintln!(
            "SKIPPED: {} is not installed; run `npm ci --prefix tests/lsp-servers`",
            path.display()
        );
        None
    }
}

struct Setup {
    workspace: tempfile::TempDir,
    _root: Scope,
    registry: Arc<ToolRegistry>,
    agent: Arc<dyn AgentHandle>,
}

fn setup(config: Value, files: &[(&str, &str)]) -> Setup {
    let workspace = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let full = workspace.path().join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, text).unwrap();
    }
    let root = Scope::root();
    let registry = ToolRegistry::install(&root, RegistryConfig::default()).unwrap();
    let cwd = workspace.path().to_path_buf();
    let scope = root.child(ScopeKind::Plugin, "lsp").unwrap();
    LspPlugin {
        workspace: Some(Arc::new(move |run| run.agent().map(|_| cwd.clone()))),
    }
    .apply(&scope, serde_json::from_value(config).unwrap())
    .unwrap();
    let agent: Arc<dyn AgentHandle> = Arc::new(Agent {
        scope: root.child(ScopeKind::Agent, "agent").unwrap(),
    });
    Setup {
        workspace,
        _root: root,
        registry,
        agent,
    }
}

impl Setup {
    async fn lsp(&self, args: Value) -> (bool, String) {
        let input = ToolCallInput::new("c", "lsp", args, CancellationToken::new())
            .agent(self.agent.clone());
        let result = self.registry.execute(input).await;
        (result.is_error, result.text())
    }
}

fn server(command: &Path, args: &[&str], ext: &[(&str, &str)]) -> Value {
    let map: serde_json::Map<String, Value> = ext
        .iter()
        .map(|(e, l)| ((*e).to_owned(), json!(l)))
        .collect();
    json!({"command": command.display().to_string(), "args": args, "extension_to_language": map})
}

const TS_LIB: &str = "export function greet(name: string): string {\n  return `hi ${name}`;\n}\n\nexport const a = greet('a');\nexport const b = greet('b');\n";
const TS_MAIN: &str = "import { greet } from './lib';\n\nconsole.log(greet('c'));\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_definitions_references_and_hover() {
    let Some(tsls) = bin("typescript-language-server") else {
        return;
    };
    let s = setup(
        json!({"servers": {"ts": server(&tsls, &["--stdio"], &[(".ts", "typescript")])}}),
        &[
            ("src/lib.ts", TS_LIB),
            ("src/main.ts", TS_MAIN),
            ("tsconfig.json", "{\"compilerOptions\": {\"strict\": true}}"),
        ],
    );
    // `greet` in `export const a = greet('a')`: line 5, character 18.
    let (err, text) = s
        .lsp(json!({"operation": "goToDefinition", "file_path": "src/lib.ts", "line": 5, "character": 18}))
        .await;
    assert!(!err, "{text}");
    assert_eq!(text, "src/lib.ts:1:17");

    let (err, text) = s
        .lsp(json!({"operation": "findReferences", "file_path": "src/lib.ts", "line": 1, "character": 17}))
        .await;
    assert!(!err, "{text}");
    // The declaration is included.
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.contains(&"src/lib.ts:1:17"), "{text}");
    assert!(lines.contains(&"src/lib.ts:5:18"), "{text}");
    assert!(lines.contains(&"src/lib.ts:6:18"), "{text}");
    // Another file's usage resolves to a location in the workspace too.
    let (err, text) = s
        .lsp(json!({"operation": "goToDefinition", "file_path": "src/main.ts", "line": 3, "character": 14}))
        .await;
    assert!(!err, "{text}");
    assert!(text.starts_with("src/"), "{text}");

    let (err, text) = s
        .lsp(json!({"operation": "hover", "file_path": "src/lib.ts", "line": 1, "character": 17}))
        .await;
    assert!(!err, "{text}");
    assert!(
        text.contains("function greet(name: string): string"),
        "{text}"
    );

    // Off any symbol.
    let (_, text) = s
        .lsp(json!({"operation": "hover", "file_path": "src/lib.ts", "line": 4, "character": 1}))
        .await;
    assert_eq!(text, "No hover information.");

    let (_, text) = s
        .lsp(json!({"operation": "hover", "file_path": "../outside.ts", "line": 1, "character": 1}))
        .await;
    assert_eq!(
        text,
        "Error: source \"../outside.ts\" resolves outside the workspace"
    );
    let (_, text) = s
        .lsp(json!({"operation": "hover", "file_path": "src/app.py", "line": 1, "character": 1}))
        .await;
    assert_eq!(text, "Error: no LSP provider handles \"src/app.py\"");
    let (_, text) = s
        .lsp(
            json!({"operation": "hover", "file_path": "src/missing.ts", "line": 1, "character": 1}),
        )
        .await;
    assert!(
        text.starts_with("Error: source \"src/missing.ts\" could not be read: "),
        "{text}"
    );
    drop(s.workspace);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pyright_definitions_and_the_location_cap() {
    let Some(pyright) = bin("pyright-langserver") else {
        return;
    };
    let source = "def area(w, h):\n    return w * h\n\n\nprint(area(1, 2))\nprint(area(3, 4))\nprint(area(5, 6))\n";
    let s = setup(
        json!({
            "max_locations": 2,
            "servers": {"py": server(&pyright, &["--stdio"], &[(".py", "python")])}
        }),
        &[("app.py", source)],
    );
    let (err, text) = s
        .lsp(json!({"operation": "goToDefinition", "file_path": "app.py", "line": 5, "character": 7}))
        .await;
    assert!(!err, "{text}");
    assert_eq!(text, "app.py:1:5");
    let (_, text) = s
        .lsp(json!({"operation": "findReferences", "file_path": "app.py", "line": 1, "character": 5}))
        .await;
    assert_eq!(
        text,
        "app.py:1:5\napp.py:5:7\n… 2 more locations omitted (limit 2)."
    );
    let (_, text) = s
        .lsp(json!({"operation": "hover", "file_path": "app.py", "line": 1, "character": 5}))
        .await;
    assert!(text.contains("def area"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_crashing_and_hanging_servers_fail_with_a_clear_error() {
    let s = setup(
        json!({
            "timeout_ms": 2000,
            "servers": {
                "missing": server(Path::new("no-such-language-server"), &[], &[(".a", "a")]),
                "crash": server(Path::new("/bin/sh"), &["-c", "echo boom >&2; exit 3"], &[(".b", "b")]),
                "hang": server(Path::new("/bin/sh"), &["-c", "exec sleep 600"], &[(".c", "c")])
            }
        }),
        &[("x.a", "a"), ("x.b", "b"), ("x.c", "c")],
    );
    let (err, text) = s
        .lsp(json!({"operation": "hover", "file_path": "x.a", "line": 1, "character": 1}))
        .await;
    assert!(err);
    assert_eq!(
        text,
        "Error: cannot start language server \"no-such-language-server\": not found on PATH"
    );
    let (_, text) = s
        .lsp(json!({"operation": "hover", "file_path": "x.b", "line": 1, "character": 1}))
        .await;
    assert!(text.starts_with("Error: language server exited"), "{text}");
    assert!(text.contains("boom"), "the stderr tail is quoted: {text}");
    let started = std::time::Instant::now();
    let (_, text) = s
        .lsp(json!({"operation": "hover", "file_path": "x.c", "line": 1, "character": 1}))
        .await;
    assert_eq!(text, "Error: tool call timed out after 2000ms");
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}

#[tokio::test]
async fn an_agentless_call_has_no_workspace() {
    let s = setup(
        json!({"servers": {"x": server(Path::new("/bin/true"), &[], &[(".x", "x")])}}),
        &[],
    );
    let input = ToolCallInput::new(
        "c",
        "lsp",
        json!({"operation": "hover", "file_path": "a.x", "line": 1, "character": 1}),
        CancellationToken::new(),
    );
    let result = s.registry.execute(input).await;
    assert_eq!(
        result.text(),
        "Error: the lsp tool requires a session workspace cwd"
    );
    let (_, text) = s
        .lsp(json!({"operation": "hover", "file_path": "a.x", "line": 0, "character": 1}))
        .await;
    assert_eq!(text, "Error: line must be a positive integer (one-based)");
}
