//! The network as a channel from `read-only`: `web_fetch` runs in dsh's own process, outside
//! the sandbox, so without an address rule the model reaches whatever this machine reaches
//! (local services, the private network, cloud metadata). Each spelling of "this machine" that
//! once worked is tried against a real local server.

use std::io::Read;
use std::io::Write;
use std::net::TcpListener;

use serde_json::json;

use super::support::Call;
use super::support::Case;
use super::support::User;
use super::support::exec;

const PAGE: &str = "INTERNAL-ONLY-PAGE-7f3a";

/// A tiny HTTP server on `address` answering every request with [`PAGE`]; its port.
fn internal_server(address: &str) -> Option<u16> {
    let listener = TcpListener::bind(address).ok()?;
    let port = listener.local_addr().ok()?.port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{PAGE}",
                PAGE.len()
            );
        }
    });
    Some(port)
}

fn fetch(url: String) -> Call {
    Call {
        tool: "web_fetch",
        args: json!({ "url": url }),
    }
}

/// Every way to write "this machine" that reached the server before.
fn loopback_spellings(v4: u16, v6: Option<u16>) -> Vec<String> {
    let mut urls: Vec<String> = [
        "127.0.0.1",
        "127.1",
        "0x7f000001",
        "2130706433",
        "0177.0.0.1",
        "[::ffff:127.0.0.1]",
        "localhost",
        "localhost.",
        "LOCALHOST",
        "0.0.0.0",
        "0",
    ]
    .iter()
    .map(|host| format!("http://{host}:{v4}/"))
    .collect();
    if let Some(v6) = v6 {
        urls.push(format!("http://[::1]:{v6}/"));
        urls.push(format!("http://[0:0:0:0:0:0:0:1]:{v6}/"));
    }
    urls
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_fetch_never_reaches_this_machine_or_private_networks_by_default() {
    let v4 = internal_server("127.0.0.1:0").expect("a loopback IPv4 server");
    let v6 = internal_server("[::1]:0");
    let mut urls = loopback_spellings(v4, v6);
    // Private, link-local, metadata and CGNAT addresses: refused before any connection.
    urls.extend(
        [
            "10.0.0.1",
            "172.16.5.4",
            "192.168.0.1",
            "169.254.169.254",
            "100.64.0.1",
            "[fd00:ec2::254]",
            "[fe80::1]",
        ]
        .iter()
        .map(|host| format!("http://{host}/latest/meta-data/")),
    );
    let calls: Vec<Call> = urls.iter().cloned().map(fetch).collect();
    for user in User::all() {
        for mode in ["read-only", "workspace-write", "danger-full-access"] {
            let case = Case::new(user);
            let (out, results) = exec(&case, mode, &calls).await;
            assert!(out.status.success(), "{user:?} {mode}: {out:?}");
            assert_eq!(results.len(), urls.len(), "{user:?} {mode}: {results:?}");
            for (url, result) in urls.iter().zip(&results) {
                // A resolver may not know `localhost.` at all; refused or unknown, never fetched.
                let unresolved = url.contains("localhost.") && result.contains("dns error");
                assert!(
                    !result.contains(PAGE) && (result.contains("is refused") || unresolved),
                    "{user:?} {mode}: {url} -> {result}"
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_person_can_allow_local_addresses() {
    let port = internal_server("127.0.0.1:0").expect("a local server");
    let calls = [
        fetch(format!("http://127.0.0.1:{port}/")),
        fetch(format!("http://localhost:{port}/")),
    ];
    for user in User::all() {
        // A project cannot allow them for itself.
        let case = Case::new(user);
        case.write_ws(
            ".dsh/config.toml",
            "[plugins.web]\nallow_private = true\nallow_hosts = [\"127.0.0.1\", \"localhost\"]\n",
        );
        let (_, results) = exec(&case, "read-only", &calls).await;
        assert_eq!(results.len(), 2, "{results:?}");
        for result in &results {
            assert!(result.contains("is refused"), "{user:?} project: {result}");
        }

        // The person's own configuration can: one host, then everything.
        for setting in ["allow_hosts = [\"127.0.0.1\"]", "allow_private = true"] {
            let case = Case::new(user);
            case.write_home(
                "config.toml",
                &format!(
                    "[plugins.session-title]\nenabled = false\n\n[plugins.compaction]\nenabled = false\n\n[plugins.web]\n{setting}\n"
                ),
            );
            let (_, results) = exec(&case, "read-only", &calls).await;
            assert!(results[0].contains(PAGE), "{user:?} {setting}: {results:?}");
            if setting.starts_with("allow_hosts") {
                assert!(results[1].contains("is refused"), "{user:?}: {results:?}");
            } else {
                assert!(results[1].contains(PAGE), "{user:?}: {results:?}");
            }
        }
    }
}
