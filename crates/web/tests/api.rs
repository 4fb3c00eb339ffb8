//! The small HTTP API beside ACP: settings writes only from this machine, keys never sent,
//! the folder picker fenced to its roots.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::Value;
use serde_json::json;
use support::Server;
use support::http;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_change_only_from_this_machine_and_keys_never_leave() {
    let server = Server::start(None).await;
    // A proxy on loopback forwarding a phone: the fence sees the phone.
    let remote = http()
        .put(server.url("/api/settings"))
        .header("x-forwarded-for", "192.168.1.23")
        .json(&json!({"model": "other"}))
        .send()
        .await
        .unwrap();
    assert_eq!(remote.status(), 403);
    let body: Value = remote.json().await.unwrap();
    assert_eq!(body["error"]["code"], "loopback-only");
    let forwarded = http()
        .put(server.url("/api/settings"))
        .header("forwarded", "for=203.0.113.9")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(forwarded.status(), 403);
    // From this machine the fence lets it through (the write itself is not offered yet).
    let local = http()
        .put(server.url("/api/settings"))
        .json(&json!({"model": "other"}))
        .send()
        .await
        .unwrap();
    assert_eq!(local.status(), 501);

    let view: Value = http()
        .get(server.url("/api/settings"))
        .header("x-forwarded-for", "192.168.1.23")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(view["writable"], false);
    assert_eq!(view["keySet"], true, "{view}");
    // The test key variable is PATH: its value never appears.
    let path = std::env::var("PATH").unwrap();
    assert!(!view.to_string().contains(&path), "{view}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_folder_picker_stays_inside_its_roots() {
    let root = tempfile::tempdir().unwrap();
    let root_path = root.path().canonicalize().unwrap();
    std::fs::create_dir_all(root_path.join("project/src")).unwrap();
    std::fs::create_dir_all(root_path.join(".hidden")).unwrap();
    std::fs::write(root_path.join("file.txt"), "x").unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), root_path.join("escape")).unwrap();
    let server = Server::start_with(dsh_web::WebConfig {
        roots: vec![root_path.clone()],
        ..dsh_web::WebConfig::default()
    })
    .await;
    let listing: Value = http()
        .get(server.url("/api/folders"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let names: Vec<&str> = listing["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [".hidden", "project"],
        "folders only, no link out: {listing}"
    );
    for path in [
        outside.path().to_path_buf(),
        root_path.join("escape"),
        root_path.join("project/../.."),
        std::path::PathBuf::from("/"),
    ] {
        let refused = http()
            .get(format!(
                "{}?path={}",
                server.url("/api/folders"),
                path.display()
            ))
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status(), 403, "{}", path.display());
    }
    let inner = http()
        .get(format!(
            "{}?path={}",
            server.url("/api/folders"),
            root_path.join("project").display()
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(inner.status(), 200);
    server.stop().await;
}
