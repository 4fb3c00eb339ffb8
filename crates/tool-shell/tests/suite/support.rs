use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use dsh_tool_shell::ShellContext;
use dsh_tool_shell::spill::SpillStore;

/// A context rooted in a fresh temp workspace, with a private spill root inside it.
pub fn context(dir: &Path) -> ShellContext {
    dsh_tool_shell::guard::set_program(env!("CARGO_BIN_EXE_dsh-tool-guard-test"));
    let mut ctx = ShellContext::new(dir, "sess-1");
    ctx.spill = Arc::new(SpillStore::new(dir.join(".spill")));
    ctx.base_env = Some(vec![(
        "PATH".to_owned(),
        std::env::var("PATH").unwrap_or_default(),
    )]);
    ctx
}

/// True while `pid` exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            // The state follows the parenthesised command name.
            let state = stat
                .rsplit(')')
                .next()
                .and_then(|rest| rest.split_whitespace().next());
            state != Some("Z") && state != Some("X")
        }
    }
}

/// Waits until no pid in `pids` is alive (up to 5 s).
pub async fn all_dead(pids: &[u32]) -> bool {
    for _ in 0..100 {
        if pids.iter().all(|p| !alive(*p)) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// Waits until `path` holds at least `lines` lines and returns them as pids.
pub async fn read_pids(path: &Path, lines: usize) -> Vec<u32> {
    for _ in 0..200 {
        if let Ok(text) = std::fs::read_to_string(path) {
            let pids: Vec<u32> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
            if pids.len() >= lines {
                return pids;
            }
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("pid file {} never filled", path.display());
}

/// The interface part of a tool schema: every prose `description` string removed, everything
/// else (names, types, enums, required lists, key order) kept. A property that is itself named
/// `description` is an object, not a string, so it survives.
pub fn shape(value: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(key, v)| !(key.as_str() == "description" && v.is_string()))
                .map(|(key, v)| (key.clone(), shape(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(shape).collect()),
        other => other.clone(),
    }
}

/// Serialized shape, so that key order is compared too.
pub fn shape_string(value: &serde_json::Value) -> String {
    serde_json::to_string(&shape(value)).unwrap()
}
