//! `dsh web` behind nginx (the Debian package, as `.ci/run` installs it), configured as
//! `docs/web.md` shows: the login and the `/acp` WebSocket pass through the proxy (upgrade
//! headers forwarded), the cookie is `Secure` because the proxy says the browser used TLS,
//! and the gate still refuses another origin and a phone's settings write.
#![allow(clippy::disallowed_methods, reason = "the test starts nginx directly")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use serde_json::json;
use support::SECRET;
use support::Server;
use support::connect_with;
use support::cookie_pair;
use support::http;

struct Nginx {
    child: std::process::Child,
    _dir: tempfile::TempDir,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The `location` block of `docs/web.md`, with the TLS server block replaced by plain HTTP
/// (the test has no certificate; the proxy still says `X-Forwarded-Proto: https`).
fn start_nginx(listen: u16, upstream: u16) -> Nginx {
    let nginx = ["/usr/sbin/nginx", "/usr/bin/nginx"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("nginx is installed (.ci/run installs the Debian package nginx-light)");
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path();
    let conf = format!(
        r#"daemon off;
master_process off;
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log;
events {{ worker_connections 64; }}
http {{
  access_log off;
  client_body_temp_path {prefix}/body;
  proxy_temp_path {prefix}/proxy;
  fastcgi_temp_path {prefix}/fastcgi;
  uwsgi_temp_path {prefix}/uwsgi;
  scgi_temp_path {prefix}/scgi;
  map $http_upgrade $connection_upgrade {{ default upgrade; '' close; }}
  server {{
    listen 127.0.0.1:{listen};
    location / {{
      proxy_pass http://127.0.0.1:{upstream};
      proxy_http_version 1.1;
      proxy_set_header Host $http_host;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection $connection_upgrade;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto https;
      proxy_read_timeout 1h;
      proxy_buffering off;
    }}
  }}
}}
"#,
        prefix = prefix.display()
    );
    let path = prefix.join("nginx.conf");
    std::fs::write(&path, conf).unwrap();
    let child = std::process::Command::new(nginx)
        .arg("-c")
        .arg(&path)
        .arg("-p")
        .arg(prefix)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", listen)).is_err() {
        assert!(std::time::Instant::now() < deadline, "nginx listens");
        std::thread::sleep(Duration::from_millis(50));
    }
    Nginx { child, _dir: dir }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_and_the_websocket_work_through_nginx() {
    let listen = free_port();
    let server = Server::start_with(dsh_web::WebConfig {
        access_secret: Some(SECRET.into()),
        trusted_hosts: vec![format!("127.0.0.1:{listen}")],
        ..dsh_web::WebConfig::default()
    })
    .await;
    let _nginx = start_nginx(listen, server.addr.port());
    let base = format!("http://127.0.0.1:{listen}");

    let denied = http()
        .get(format!("{base}/api/status"))
        .send()
        .await
        .unwrap();
    assert_eq!(denied.status(), 401);
    let login = http()
        .post(format!("{base}/__dsh/access"))
        .header("origin", &base)
        .json(&json!({"secret": SECRET}))
        .send()
        .await
        .unwrap();
    assert_eq!(login.status(), 204);
    let set = login.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        set.contains("; Secure"),
        "behind TLS the cookie is Secure: {set}"
    );
    let cookie = cookie_pair(&login);

    let ws = format!("ws://127.0.0.1:{listen}/acp");
    let mut client = connect_with(&ws, &[("cookie", &cookie), ("origin", &base)])
        .await
        .expect("the upgrade passes the proxy");
    assert_eq!(client.initialize().await["result"]["protocolVersion"], 1);
    assert_eq!(
        connect_with(
            &ws,
            &[("cookie", &cookie), ("origin", "https://evil.example")]
        )
        .await
        .err(),
        Some(403)
    );
    // Through the proxy the client is whoever nginx forwards: here loopback, so the fence
    // lets a settings write reach the handler; a forwarded phone is refused.
    let phone = http()
        .put(format!("{base}/api/settings"))
        .header("cookie", &cookie)
        .header("x-forwarded-for", "192.168.1.50")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(phone.status(), 403);
    server.stop().await;
}
