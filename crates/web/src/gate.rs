//! The access gate, applied to every request before any handler runs.
//!
//! - `Host` must name this server (DNS rebinding): `localhost`, `127.x.y.z` or `[::1]`, with
//!   this server's port or none; an authority given with `--trusted-host` (with a port: exactly
//!   that; without: any port); and, when bound to every address, any IP literal (a rebinding
//!   attack needs a DNS name).
//! - `Origin`, when a browser sends one, must be this same host: checked on the WebSocket
//!   upgrade and on every request that is not `GET`/`HEAD`/`OPTIONS`. A request a browser
//!   marks `Sec-Fetch-Site: cross-site` is refused the same way.
//! - With an access secret, every request but the login and logout posts needs the cookie the
//!   login sets (`dsh_access`, upstream's token: `<expiry>.<hex HMAC-SHA256>` keyed by the
//!   secret, so it never contains the secret and a new secret voids every cookie). Without
//!   it: `/api`, `/acp` and non-`GET` requests answer 401 `Unauthorized`, pages the login form.
//! - Wrong secrets are rate-limited per direct TCP peer (5 a minute, as upstream).

use std::collections::HashMap;
use std::net::IpAddr;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;
use std::time::Instant;

use axum::http::HeaderMap;
use axum::http::Method;
use axum::http::header;

/// The environment variable holding the access secret.
pub const ACCESS_SECRET_VAR: &str = "DSH_ACCESS_SECRET";
/// The session cookie set at login.
pub const COOKIE_NAME: &str = "dsh_access";
/// How long a login lasts (upstream's default, 7 days).
pub(crate) const LOGIN_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
/// The shortest access secret accepted (after trimming).
pub const MIN_SECRET_CHARS: usize = 16;
/// Wrong secrets allowed per client address in [`FAILURE_WINDOW`].
pub(crate) const MAX_FAILURES: u32 = 5;
pub(crate) const FAILURE_WINDOW: Duration = Duration::from_secs(60);
/// Client addresses tracked for the rate limit at once.
const MAX_TRACKED: usize = 4096;

/// Why a request is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    Host,
    Origin,
    Login,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The gate's settings and state, one per server.
pub(crate) struct Gate {
    port: u16,
    bound_everywhere: bool,
    /// Host names (lowercase) accepted besides loopback, each with its port or any port.
    allowed: Vec<(String, Option<u16>)>,
    /// The cookie key: HMAC-SHA256("dsh-access-cookie-v1", secret).
    cookie_key: Option<[u8; 32]>,
    /// HMAC-SHA256("dsh-access-secret-compare", secret).
    secret_digest: Option<[u8; 32]>,
    failures: Mutex<HashMap<IpAddr, (u32, Instant)>>,
}

/// Splits `host[:port]` (with `[v6]` brackets) into a lowercase name and its port.
pub(crate) fn split_authority(authority: &str) -> Option<(String, Option<u16>)> {
    let authority = authority.trim();
    if authority.is_empty() {
        return None;
    }
    let (name, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (inside, after) = rest.split_once(']')?;
        let port = match after {
            "" => None,
            after => Some(after.strip_prefix(':')?.parse().ok()?),
        };
        (format!("[{inside}]"), port)
    } else {
        match authority.rsplit_once(':') {
            Some((name, port)) => (name.to_owned(), Some(port.parse().ok()?)),
            None => (authority.to_owned(), None),
        }
    };
    if name.contains(['/', '@', ' ']) {
        return None;
    }
    Some((name.to_ascii_lowercase(), port))
}

/// `localhost`, `[::1]` or a dotted-quad `127.x.y.z` (upstream's loopback names).
fn is_loopback(name: &str) -> bool {
    if matches!(name, "localhost" | "[::1]") {
        return true;
    }
    let parts: Vec<&str> = name.split('.').collect();
    parts.len() == 4
        && parts[0] == "127"
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.len() <= 3
                && p.bytes().all(|b| b.is_ascii_digit())
                && p.parse::<u16>().is_ok_and(|n| n <= 255)
        })
}

fn is_ip_literal(name: &str) -> bool {
    let bare = name.trim_start_matches('[').trim_end_matches(']');
    bare.parse::<IpAddr>().is_ok()
}

/// Compares without stopping at the first difference.
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// HMAC-SHA256 (RFC 2104).
fn hmac_sha256(key: &[u8], data: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    const BLOCK: usize = 64;
    let mut block = [0u8; BLOCK];
    if key.len() > BLOCK {
        block[..32].copy_from_slice(&sha2::Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let mut inner = sha2::Sha256::new();
    inner.update(block.map(|b| b ^ 0x36));
    inner.update(data);
    let mut outer = sha2::Sha256::new();
    outer.update(block.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn cookie_values(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .filter(|(name, _)| *name == COOKIE_NAME)
        .map(|(_, value)| value)
}

impl Gate {
    pub(crate) fn new(
        local: SocketAddr,
        host_flag: Option<&str>,
        trusted_hosts: &[String],
        secret: Option<&str>,
    ) -> Self {
        let mut allowed: Vec<(String, Option<u16>)> = trusted_hosts
            .iter()
            .filter_map(|h| split_authority(h))
            .collect();
        if let Some(host) = host_flag
            && let Some((name, _)) = split_authority(host)
            && !is_loopback(&name)
        {
            allowed.push((name, Some(local.port())));
        }
        Self {
            port: local.port(),
            bound_everywhere: local.ip().is_unspecified(),
            allowed,
            cookie_key: secret.map(|s| hmac_sha256(b"dsh-access-cookie-v1", s.trim().as_bytes())),
            secret_digest: secret
                .map(|s| hmac_sha256(b"dsh-access-secret-compare", s.trim().as_bytes())),
            failures: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn has_secret(&self) -> bool {
        self.cookie_key.is_some()
    }

    fn host_allowed(&self, authority: &str) -> bool {
        let Some((name, port)) = split_authority(authority) else {
            return false;
        };
        if is_loopback(&name) && (port.is_none() || port == Some(self.port)) {
            return true;
        }
        if self.bound_everywhere && is_ip_literal(&name) {
            return true;
        }
        self.allowed.iter().any(|(allowed, allowed_port)| {
            *allowed == name && (allowed_port.is_none() || *allowed_port == port)
        })
    }

    /// The `Host`/`Origin` checks, for every request.
    pub(crate) fn check_request(
        &self,
        method: &Method,
        headers: &HeaderMap,
        upgrade: bool,
    ) -> Result<(), Refusal> {
        let host = headers
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .ok_or(Refusal::Host)?;
        if !self.host_allowed(host) {
            return Err(Refusal::Host);
        }
        let state_changing = !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS);
        if !(upgrade || state_changing) {
            return Ok(());
        }
        if headers
            .get("sec-fetch-site")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|site| site.eq_ignore_ascii_case("cross-site"))
        {
            return Err(Refusal::Origin);
        }
        match headers.get(header::ORIGIN) {
            // Not a browser page (a script, an editor, an SDK client): no origin to check.
            None => Ok(()),
            Some(origin) => {
                let origin = origin.to_str().map_err(|_| Refusal::Origin)?;
                let authority = origin
                    .strip_prefix("http://")
                    .or_else(|| origin.strip_prefix("https://"))
                    .ok_or(Refusal::Origin)?;
                let same = split_authority(authority)
                    .zip(split_authority(host))
                    .is_some_and(|(a, b)| a == b);
                if same { Ok(()) } else { Err(Refusal::Origin) }
            }
        }
    }

    /// The cookie check for requests past the login.
    pub(crate) fn check_login(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        let Some(key) = &self.cookie_key else {
            return Ok(());
        };
        let now = unix_now();
        let valid = cookie_values(headers).any(|token| {
            let Some((expiry, signature)) = token.split_once('.') else {
                return false;
            };
            !expiry.is_empty()
                && expiry.bytes().all(|b| b.is_ascii_digit())
                && expiry.parse::<u64>().is_ok_and(|at| at > now)
                && same_bytes(
                    signature.as_bytes(),
                    hex(&hmac_sha256(key, expiry.as_bytes())).as_bytes(),
                )
        });
        if valid { Ok(()) } else { Err(Refusal::Login) }
    }

    /// Whether `client` may try a secret now (not over its failure budget).
    pub(crate) fn may_try(&self, client: IpAddr) -> Result<(), Duration> {
        let failures = lock(&self.failures);
        match failures.get(&client) {
            Some((count, since)) if *count >= MAX_FAILURES => {
                let waited = since.elapsed();
                if waited >= FAILURE_WINDOW {
                    Ok(())
                } else {
                    Err(FAILURE_WINDOW - waited)
                }
            }
            _ => Ok(()),
        }
    }

    /// Checks a submitted secret; on success, a new cookie value.
    pub(crate) fn login(&self, client: IpAddr, submitted: &str) -> Option<String> {
        let (key, digest) = self.cookie_key.as_ref().zip(self.secret_digest.as_ref())?;
        let offered = hmac_sha256(b"dsh-access-secret-compare", submitted.trim().as_bytes());
        if !same_bytes(&offered, digest) {
            let mut failures = lock(&self.failures);
            if failures.len() >= MAX_TRACKED {
                failures.retain(|_, (_, since)| since.elapsed() < FAILURE_WINDOW);
            }
            let entry = failures.entry(client).or_insert((0, Instant::now()));
            if entry.1.elapsed() >= FAILURE_WINDOW {
                *entry = (0, Instant::now());
            }
            entry.0 += 1;
            return None;
        }
        lock(&self.failures).remove(&client);
        let expiry = (unix_now() + LOGIN_TTL.as_secs()).to_string();
        let signature = hex(&hmac_sha256(key, expiry.as_bytes()));
        Some(format!("{expiry}.{signature}"))
    }
}

/// Whether the request's real client is on this machine: a loopback peer that is not a
/// proxy forwarding someone else (`X-Forwarded-For` / `Forwarded` name the real client).
pub(crate) fn is_local_client(peer: SocketAddr, headers: &HeaderMap) -> bool {
    if !peer.ip().is_loopback() {
        return false;
    }
    let forwarded_for = headers
        .get("x-forwarded-for")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(',').map(str::trim).collect::<Vec<_>>());
    match forwarded_for {
        Some(hops) => hops
            .iter()
            .all(|hop| hop.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())),
        None => !headers.contains_key("forwarded"),
    }
}

/// Whether the browser reached us over TLS: only a loopback proxy is believed about it.
pub(crate) fn behind_tls(peer: SocketAddr, headers: &HeaderMap) -> bool {
    peer.ip().is_loopback()
        && headers
            .get("x-forwarded-proto")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|proto| proto.eq_ignore_ascii_case("https"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(bind: &str, allow: &[&str]) -> Gate {
        let allow: Vec<String> = allow.iter().map(|s| (*s).to_owned()).collect();
        Gate::new(bind.parse().unwrap(), None, &allow, None)
    }

    #[test]
    fn hosts() {
        let g = gate("127.0.0.1:3080", &["dsh.example.com"]);
        for ok in [
            "localhost:3080",
            "127.0.0.1:3080",
            "[::1]:3080",
            "LOCALHOST",
            "127.1.2.3:3080",
            "dsh.example.com:443",
        ] {
            assert!(g.host_allowed(ok), "{ok}");
        }
        for bad in [
            "evil.com:3080",
            "localhost:3081",
            "127.0.0.256:3080",
            "128.0.0.1:3080",
            "",
            "localhost:x",
            "a@b",
        ] {
            assert!(!g.host_allowed(bad), "{bad}");
        }
        let everywhere = gate("0.0.0.0:3080", &[]);
        assert!(everywhere.host_allowed("192.168.1.7:3080"));
        assert!(!everywhere.host_allowed("rebind.evil.com:3080"));
    }

    #[test]
    fn hmac_matches_rfc_4231_case_2() {
        assert_eq!(
            hex(&hmac_sha256(b"Jefe", b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn a_login_makes_a_cookie_that_only_this_secret_accepts() {
        let local: SocketAddr = "127.0.0.1:3080".parse().unwrap();
        let gate = Gate::new(local, None, &[], Some("correct horse battery staple"));
        let peer = local.ip();
        assert!(gate.login(peer, "wrong").is_none());
        let token = gate.login(peer, " correct horse battery staple ").unwrap();
        assert!(!token.contains("horse"));
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            format!("a=b; {COOKIE_NAME}={token}").parse().unwrap(),
        );
        assert_eq!(gate.check_login(&headers), Ok(()));
        let other = Gate::new(local, None, &[], Some("another secret of enough length"));
        assert_eq!(other.check_login(&headers), Err(Refusal::Login));
        let forged = format!("{COOKIE_NAME}=99999999999.{}", "0".repeat(64));
        headers.insert(header::COOKIE, forged.parse().unwrap());
        assert_eq!(gate.check_login(&headers), Err(Refusal::Login));
    }
}
