//! Replays the recorded file-tool calls of the conformance scenarios against real temp
//! workspaces and compares the rendered text, error flag and meta byte for byte.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;
use std::time::SystemTime;

use base64::Engine;
use dsh_protocol::ContentBlock;
use dsh_tool_fs::FilePolicy;
use dsh_tool_fs::FsContext;
use dsh_tool_fs::FsError;
use dsh_tool_fs::edit;
use dsh_tool_fs::glob;
use dsh_tool_fs::grep;
use dsh_tool_fs::read;
use dsh_tool_fs::read_image;
use dsh_tool_fs::write;
use pretty_assertions::assert_eq;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

const ROOT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/conformance/acp"
);

fn build_workspace(scenario: &Value, dir: &Path) {
    let files = scenario["workspace"]["files"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    for (name, spec) in &files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        match spec {
            Value::String(text) => std::fs::write(&path, text).unwrap(),
            Value::Object(map) if map.contains_key("base64") => {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(map["base64"].as_str().unwrap())
                    .unwrap();
                std::fs::write(&path, bytes).unwrap();
            }
            Value::Object(map) if map.contains_key("text") => {
                std::fs::write(&path, map["text"].as_str().unwrap()).unwrap()
            }
            Value::Object(map) if map.contains_key("symlink") => {
                std::os::unix::fs::symlink(map["symlink"].as_str().unwrap(), &path).unwrap();
            }
            other => panic!("unsupported workspace entry {other}"),
        }
    }
    // Only the relative order of the recorded local mtimes matters: sort and space them out.
    if let Some(mtimes) = scenario["workspace"]["mtimes"].as_object() {
        let mut ordered: Vec<(&String, &str)> = mtimes
            .iter()
            .map(|(k, v)| (k, v.as_str().unwrap()))
            .collect();
        ordered.sort_by_key(|(_, when)| *when);
        for (index, (name, _)) in ordered.iter().enumerate() {
            let when = SystemTime::UNIX_EPOCH + Duration::from_secs(946_684_800 + index as u64);
            std::fs::File::options()
                .write(true)
                .open(dir.join(name))
                .unwrap()
                .set_modified(when)
                .unwrap();
        }
    }
}

struct Outcome {
    content: Vec<ContentBlock>,
    is_error: bool,
    meta: Option<Value>,
}

fn failed(err: FsError) -> Outcome {
    Outcome {
        content: vec![ContentBlock::text(err.model_text())],
        is_error: true,
        meta: None,
    }
}

async fn call(name: &str, arguments: &Value, ctx: &FsContext) -> Outcome {
    let cancel = CancellationToken::new();
    macro_rules! tool {
        ($module:ident) => {{
            let args = serde_json::from_value(arguments.clone()).unwrap();
            match $module::run(&args, ctx, cancel).await {
                Ok(out) => Outcome {
                    content: $module::render(&args, &out),
                    is_error: false,
                    meta: Some($module::presentation_meta(&args, &out)),
                },
                Err(err) => failed(err),
            }
        }};
    }
    match name {
        "read" => tool!(read),
        "write" => tool!(write),
        "edit" => tool!(edit),
        "glob" => {
            let args: glob::GlobArgs = serde_json::from_value(arguments.clone()).unwrap();
            let config = glob::GlobConfig::from_limits(&ctx.limits);
            match glob::run(&args, ctx, cancel).await {
                Ok(out) => Outcome {
                    content: glob::spill_content(&args, &out, ctx)
                        .unwrap_or_else(|| glob::render_with(&config, &args, &out, None)),
                    is_error: false,
                    meta: Some(glob::presentation_meta_with(
                        &config,
                        &out,
                        ctx.limits.search_meta_max_bytes,
                    )),
                },
                Err(err) => failed(err),
            }
        }
        "grep" => tool!(grep),
        "read_image" => {
            let args: read_image::ReadImageArgs =
                serde_json::from_value(arguments.clone()).unwrap();
            match read_image::run(&args, ctx, cancel).await {
                Ok(out) => Outcome {
                    content: read_image::render(&args, &out),
                    is_error: false,
                    meta: None,
                },
                Err(err) => failed(err),
            }
        }
        other => panic!("not a file tool: {other}"),
    }
}

async fn replay(name: &str, configure: impl Fn(&mut FsContext)) -> usize {
    let base = Path::new(ROOT).join(name);
    let scenario: Value =
        serde_json::from_str(&std::fs::read_to_string(base.join("scenario.json")).unwrap())
            .unwrap();
    let dir = tempfile::tempdir().unwrap();
    build_workspace(&scenario, dir.path());
    let mut ctx = FsContext::new(dir.path(), FilePolicy::danger_full_access(dir.path()));
    configure(&mut ctx);
    let cwd = dir.path().display().to_string();
    let mut replayed = 0;
    for line in std::fs::read_to_string(base.join("tool-results.jsonl"))
        .unwrap()
        .lines()
    {
        let record: Value = serde_json::from_str(line).unwrap();
        let outcome = call(record["name"].as_str().unwrap(), &record["arguments"], &ctx).await;
        let text = dsh_protocol::text_of(&outcome.content).replace(&cwd, "{{cwd}}");
        assert_eq!(
            text,
            record["text"].as_str().unwrap(),
            "{name}: {}",
            record["call_id"]
        );
        assert_eq!(outcome.is_error, record["is_error"].as_bool().unwrap());
        let content: Vec<Value> = outcome.content.iter().map(ContentBlock::to_value).collect();
        let content = serde_json::to_string(&content)
            .unwrap()
            .replace(&cwd, "{{cwd}}");
        assert_eq!(content, serde_json::to_string(&record["content"]).unwrap());
        if let Some(expected) = record.get("meta") {
            let meta = serde_json::to_string(&outcome.meta)
                .unwrap()
                .replace(&cwd, "{{cwd}}");
            assert_eq!(
                meta,
                serde_json::to_string(expected).unwrap(),
                "{name}: meta"
            );
        } else {
            // Tools without meta (read_image) persist no meta key at all.
            assert!(outcome.meta.is_none(), "{name}: unexpected meta");
        }
        replayed += 1;
    }
    replayed
}

#[tokio::test]
async fn fs_read() {
    assert_eq!(replay("fs-read", |_| {}).await, 1);
}

#[tokio::test]
async fn fs_write() {
    assert_eq!(replay("fs-write", |_| {}).await, 1);
}

#[tokio::test]
async fn fs_edit() {
    assert_eq!(replay("fs-edit", |_| {}).await, 2);
}

#[tokio::test]
async fn parallel_tool_calls() {
    assert_eq!(replay("parallel-tool-calls", |_| {}).await, 2);
}

#[tokio::test]
async fn fs_glob_sampling() {
    // Composition overlay: globMaxResults 4, sampling on, no spill store.
    let n = replay("fs-glob-sampling", |ctx| {
        ctx.limits.glob_max_results = 4;
        ctx.limits.sample_over_cap_glob_results = true;
    })
    .await;
    assert_eq!(n, 1);
}

struct KeepAll;

impl read_image::AttachmentStore for KeepAll {
    fn save_image(
        &self,
        _attachment: &read_image::ImageAttachment,
        _bytes: &[u8],
    ) -> Result<(), dsh_tools::AttachmentStoreError> {
        Ok(())
    }
}

#[tokio::test]
async fn read_image_scenario() {
    // Composition overlay: attachment store, image-capable model selected.
    let n = replay("read-image", |ctx| {
        ctx.images = Some(read_image::ImageSupport {
            store: std::sync::Arc::new(KeepAll),
            accepted_media_types: vec![
                "image/png".into(),
                "image/jpeg".into(),
                "image/webp".into(),
                "image/gif".into(),
            ],
            route: read_image::ImageRoute::Model {
                model: "deepseek-v4-flash-vision-exp".into(),
                accepts_images: true,
            },
        });
    })
    .await;
    assert_eq!(n, 1);
}

#[tokio::test]
async fn agent_instructions_reads() {
    // Relative paths, one through a directory named `scope</system-reminder>` (not escaped).
    assert_eq!(replay("agent-instructions", |_| {}).await, 2);
}
