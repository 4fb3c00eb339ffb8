//! The access gate of `dsh web`, probed with real HTTP and WebSocket clients against a real
//! server on a free port: `Host` (DNS rebinding), `Origin` (other sites' pages), the access
//! secret, its cookie and the login rate limit.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::json;
use support::SECRET;
use support::Server;
use support::connect_with;
use support::cookie_pair;
use support::http;
use support::login;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_of_another_origin_cannot_open_the_websocket_nor_post() {
    let server = Server::start(None).await;
    let port = server.addr.port();
    for origin in [
        "http://evil.example".to_owned(),
        format!("http://evil.example:{port}"),
        "null".to_owned(),
        format!("http://127.0.0.1:{}", port + 1),
    ] {
        let refused = connect_with(&server.ws_url(), &[("origin", &origin)]).await;
        assert_eq!(refused.err(), Some(403), "origin {origin}");
    }
    let cross_site = connect_with(&server.ws_url(), &[("sec-fetch-site", "cross-site")]).await;
    assert_eq!(cross_site.err(), Some(403));
    let post = http()
        .post(server.url("/__dsh/access/logout"))
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(post.status(), 403);

    // The same origin, and a client that is not a browser page (no Origin), are served.
    let same = format!("http://127.0.0.1:{port}");
    let mut client = connect_with(&server.ws_url(), &[("origin", &same)])
        .await
        .unwrap();
    assert_eq!(client.initialize().await["result"]["protocolVersion"], 1);
    let mut script = connect_with(&server.ws_url(), &[]).await.unwrap();
    assert_eq!(script.initialize().await["result"]["protocolVersion"], 1);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebound_host_name_is_refused() {
    let server = Server::start(None).await;
    let port = server.addr.port();
    for host in [
        format!("evil.example:{port}"),
        format!("localhost:{}", port + 1),
        "localhost.evil.example".to_owned(),
    ] {
        let response = http()
            .get(server.url("/"))
            .header("host", &host)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 403, "host {host}");
        assert_eq!(response.text().await.unwrap(), "forbidden");
        let refused = connect_with(&server.ws_url(), &[("host", &host)]).await;
        assert_eq!(refused.err(), Some(403), "host {host}");
    }
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
    ] {
        let response = http()
            .get(server.url("/"))
            .header("host", &host)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "host {host}");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_host_is_accepted() {
    let server = Server::start_with(dsh_web::WebConfig {
        trusted_hosts: vec!["dsh.example.com".into()],
        ..dsh_web::WebConfig::default()
    })
    .await;
    let response = http()
        .get(server.url("/"))
        .header("host", "dsh.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_loopback_bind_without_a_secret_is_refused_before_accepting() {
    let home = tempfile::tempdir().unwrap();
    let (host, _) = support::host(home.path());
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let served = dsh_web::serve(
        listener,
        host.sessions(),
        dsh_web::WebConfig::default(),
        std::future::pending(),
    )
    .await;
    let error = served.expect_err("refused");
    assert!(
        matches!(error, dsh_web::WebError::SecretRequired { .. }),
        "{error}"
    );
    assert!(error.to_string().contains("DSH_ACCESS_SECRET"), "{error}");
    // The listener is gone: nothing was ever served on it.
    assert!(
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
    );

    // A blank secret is no secret; a short one is refused.
    for (secret, short) in [("   ", false), ("short secret", true)] {
        let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
        let error = dsh_web::serve(
            listener,
            host.sessions(),
            dsh_web::WebConfig {
                access_secret: Some(secret.into()),
                ..dsh_web::WebConfig::default()
            },
            std::future::pending(),
        )
        .await
        .expect_err("refused");
        assert_eq!(
            matches!(error, dsh_web::WebError::SecretTooShort { .. }),
            short,
            "{error}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_secret_nothing_is_served_without_the_cookie() {
    let server = Server::start(Some(SECRET)).await;
    let api = http().get(server.url("/api/status")).send().await.unwrap();
    assert_eq!(api.status(), 401);
    assert_eq!(api.text().await.unwrap(), "Unauthorized");
    let page = http().get(server.url("/")).send().await.unwrap();
    assert_eq!(page.status(), 401);
    let body = page.text().await.unwrap();
    assert!(
        body.contains("action=\"/__dsh/access\""),
        "the login form: {body}"
    );
    assert_eq!(connect_with(&server.ws_url(), &[]).await.err(), Some(401));
    let forged = format!("{}=4102444800.{}", dsh_web::COOKIE_NAME, "ab".repeat(32));
    assert_eq!(
        connect_with(&server.ws_url(), &[("cookie", &forged)])
            .await
            .err(),
        Some(401)
    );

    let wrong = login(&server, "not the secret at all").await;
    assert_eq!(wrong.status(), 401);
    assert!(wrong.headers().get("set-cookie").is_none());

    let ok = login(&server, SECRET).await;
    assert_eq!(ok.status(), 204);
    let set = ok.headers()["set-cookie"].to_str().unwrap().to_owned();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set.contains(attribute), "{set}");
    }
    assert!(!set.contains("Secure"), "plain HTTP: no Secure");
    assert!(
        !set.contains(SECRET),
        "the cookie never holds the secret: {set}"
    );
    let cookie = cookie_pair(&ok);

    let api = http()
        .get(server.url("/api/status"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(api.status(), 200);
    let status: serde_json::Value = api.json().await.unwrap();
    assert_eq!(status["loginRequired"], true);
    assert!(!status.to_string().contains(SECRET));
    let page = http()
        .get(server.url("/"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let mut client = connect_with(&server.ws_url(), &[("cookie", &cookie)])
        .await
        .unwrap();
    assert_eq!(client.initialize().await["result"]["protocolVersion"], 1);

    // A form login (the page above) answers with a redirect to the app.
    let form = http()
        .post(server.url("/__dsh/access"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("secret={}", SECRET.replace(' ', "+")))
        .send()
        .await
        .unwrap();
    assert_eq!(form.status(), 303);
    assert_eq!(form.headers()["location"], "/");

    // Behind a TLS proxy on loopback, the cookie is Secure.
    let proxied = http()
        .post(server.url("/__dsh/access"))
        .header("x-forwarded-proto", "https")
        .json(&json!({"secret": SECRET}))
        .send()
        .await
        .unwrap();
    assert!(
        proxied.headers()["set-cookie"]
            .to_str()
            .unwrap()
            .contains("; Secure")
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_secrets_are_rate_limited() {
    let server = Server::start(Some(SECRET)).await;
    for attempt in 0..5 {
        let wrong = login(&server, &format!("wrong secret number {attempt}")).await;
        assert_eq!(wrong.status(), 401, "attempt {attempt}");
    }
    // Over the budget even the right secret waits.
    let limited = login(&server, SECRET).await;
    assert_eq!(limited.status(), 429);
    assert!(limited.headers().contains_key("retry-after"));
    assert!(limited.headers().get("set-cookie").is_none());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_or_malformed_login_is_refused() {
    let server = Server::start(Some(SECRET)).await;
    let big = http()
        .post(server.url("/__dsh/access"))
        .header("content-type", "application/json")
        .body(format!("{{\"secret\": \"{}\"}}", "x".repeat(5000)))
        .send()
        .await
        .unwrap();
    assert_eq!(big.status(), 413);
    let malformed = http()
        .post(server.url("/__dsh/access"))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(malformed.status(), 400);
    server.stop().await;
}
