//! Which addresses `web_fetch` may connect to. A model that can fetch any URL from dsh's own
//! process could otherwise reach what only this machine can: a local service on loopback, the
//! private network, a cloud metadata endpoint (169.254.169.254 hands out credentials) — from
//! `read-only`, where bash has no network at all.
//!
//! Every host name is resolved by [`CheckedResolver`], which keeps only the permitted
//! addresses; the HTTP client connects to exactly those (no second lookup, so a name that
//! changes its answer between the check and the connect — DNS rebinding — gains nothing).
//! IP literals never reach a resolver and are checked by [`AddressPolicy::check_host`] before
//! each request and on each redirect hop.

use std::net::IpAddr;
use std::net::Ipv4Addr;
use std::net::Ipv6Addr;
use std::net::SocketAddr;
use std::sync::Arc;

/// Which kind of non-public address `ip` is, if it is one.
pub fn non_public_kind(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => v4_kind(v4),
        IpAddr::V6(v6) => v6_kind(v6),
    }
}

fn v4_kind(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    Some(match (a, b, c) {
        _ if ip == Ipv4Addr::new(169, 254, 169, 254) => "cloud metadata",
        (0, _, _) => "unspecified (\"this host\")",
        (127, _, _) => "loopback",
        (10, _, _) | (192, 168, _) => "private (RFC 1918)",
        (172, 16..=31, _) => "private (RFC 1918)",
        (169, 254, _) => "link-local",
        (100, 64..=127, _) => "carrier-grade NAT (shared)",
        (192, 0, 0) => "IETF protocol assignment",
        (198, 18..=19, _) => "benchmarking",
        (224..=239, _, _) => "multicast",
        (240..=255, _, _) => "reserved or broadcast",
        _ => return None,
    })
}

fn v6_kind(ip: Ipv6Addr) -> Option<&'static str> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return v4_kind(v4);
    }
    let segments = ip.segments();
    if ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
        return Some("cloud metadata");
    }
    Some(match segments {
        [0, 0, 0, 0, 0, 0, 0, 0] => "unspecified",
        [0, 0, 0, 0, 0, 0, 0, 1] => "loopback",
        // IPv4-compatible (deprecated), NAT64 and 6to4 addresses carry an IPv4 address.
        [0, 0, 0, 0, 0, 0, hi, lo] | [0x64, 0xff9b, 0, 0, 0, 0, hi, lo] => {
            return v4_kind(embedded(hi, lo));
        }
        [0x2002, hi, lo, ..] => return v4_kind(embedded(hi, lo)),
        [first, ..] if first & 0xfe00 == 0xfc00 => "unique-local",
        [first, ..] if first & 0xffc0 == 0xfe80 => "link-local",
        [first, ..] if first & 0xffc0 == 0xfec0 => "site-local",
        [first, ..] if first & 0xff00 == 0xff00 => "multicast",
        [0x100, 0, 0, 0, ..] => "discard-only",
        _ => return None,
    })
}

fn embedded(hi: u16, lo: u16) -> Ipv4Addr {
    let [a, b] = hi.to_be_bytes();
    let [c, d] = lo.to_be_bytes();
    Ipv4Addr::new(a, b, c, d)
}

/// `[plugins.web]`'s address rule: public addresses only, unless the person allows more.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddressPolicy {
    /// Every address may be fetched (`allow_private = true`).
    pub allow_private: bool,
    /// Hosts (names or IP literals, as written in a URL, case-insensitive) that may be
    /// fetched whatever they resolve to (`allow_hosts`).
    pub allow_hosts: Vec<String>,
}

/// Why a fetch was not sent (the `Display` text is the model-facing message).
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "fetching {host} is refused: it is {address}, a {kind} address (web_fetch reaches public addresses only; the user can allow more with [plugins.web] allow_hosts or allow_private)"
)]
pub struct Refused {
    pub host: String,
    pub address: IpAddr,
    pub kind: &'static str,
}

impl AddressPolicy {
    fn host_allowed(&self, host: &str) -> bool {
        let host = normalise(host);
        self.allow_private
            || self
                .allow_hosts
                .iter()
                .any(|allowed| normalise(allowed) == host)
    }

    /// Checks a parsed URL's host (`Url::host_str`: IPv4 literals already in dotted form,
    /// IPv6 in brackets) when it is an IP literal; names are checked when resolved.
    pub fn check_host(&self, host: &str) -> Result<(), Refused> {
        let Ok(address) = normalise(host).parse::<IpAddr>() else {
            return Ok(());
        };
        if self.host_allowed(host) {
            return Ok(());
        }
        match non_public_kind(address) {
            Some(kind) => Err(Refused {
                host: host.to_owned(),
                address,
                kind,
            }),
            None => Ok(()),
        }
    }

    /// The permitted addresses among `resolved` for `host`; the refusal of the first one
    /// when none is.
    pub fn filter(
        &self,
        host: &str,
        resolved: impl IntoIterator<Item = SocketAddr>,
    ) -> Result<Vec<SocketAddr>, Refused> {
        let resolved: Vec<SocketAddr> = resolved.into_iter().collect();
        if self.host_allowed(host) {
            return Ok(resolved);
        }
        let mut refused = None;
        let kept: Vec<SocketAddr> = resolved
            .into_iter()
            .filter(|addr| match non_public_kind(addr.ip()) {
                Some(kind) => {
                    refused.get_or_insert(Refused {
                        host: host.to_owned(),
                        address: addr.ip(),
                        kind,
                    });
                    false
                }
                None => true,
            })
            .collect();
        match refused {
            Some(refused) if kept.is_empty() => Err(refused),
            _ => Ok(kept),
        }
    }
}

/// A host as compared: lower case, no trailing dot, no IPv6 brackets.
fn normalise(host: &str) -> String {
    host.trim_end_matches('.')
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase()
}

/// The HTTP client's resolver: the system's lookup, then [`AddressPolicy::filter`].
#[derive(Debug, Clone)]
pub struct CheckedResolver {
    pub policy: Arc<AddressPolicy>,
}

impl reqwest::dns::Resolve for CheckedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.policy.clone();
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let resolved = tokio::net::lookup_host((host.as_str(), 0)).await?;
            let kept = policy.filter(&host, resolved)?;
            let addrs: reqwest::dns::Addrs = Box::new(kept.into_iter());
            Ok(addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(text: &str) -> Option<&'static str> {
        non_public_kind(text.parse().unwrap())
    }

    #[test]
    fn every_non_public_range_is_named() {
        for (address, expected) in [
            ("127.0.0.1", "loopback"),
            ("127.255.0.9", "loopback"),
            ("0.0.0.0", "unspecified (\"this host\")"),
            ("10.1.2.3", "private (RFC 1918)"),
            ("172.16.0.1", "private (RFC 1918)"),
            ("172.31.255.255", "private (RFC 1918)"),
            ("192.168.1.1", "private (RFC 1918)"),
            ("169.254.169.254", "cloud metadata"),
            ("169.254.1.1", "link-local"),
            ("100.64.0.1", "carrier-grade NAT (shared)"),
            ("224.0.0.1", "multicast"),
            ("255.255.255.255", "reserved or broadcast"),
            ("::1", "loopback"),
            ("::", "unspecified"),
            ("::ffff:127.0.0.1", "loopback"),
            ("::ffff:10.0.0.1", "private (RFC 1918)"),
            ("::127.0.0.1", "loopback"),
            ("64:ff9b::a9fe:a9fe", "cloud metadata"),
            ("2002:7f00:1::", "loopback"),
            ("fd00:ec2::254", "cloud metadata"),
            ("fc00::1", "unique-local"),
            ("fe80::1", "link-local"),
            ("ff02::1", "multicast"),
        ] {
            assert_eq!(kind(address), Some(expected), "{address}");
        }
        for public in [
            "1.1.1.1",
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700::1111",
        ] {
            assert_eq!(kind(public), None, "{public}");
        }
    }

    #[test]
    fn resolved_names_keep_only_public_addresses() {
        let policy = AddressPolicy::default();
        let addr = |text: &str| SocketAddr::new(text.parse().unwrap(), 0);
        assert_eq!(
            policy
                .filter("mixed.example", [addr("127.0.0.1"), addr("1.1.1.1")])
                .unwrap(),
            vec![addr("1.1.1.1")]
        );
        let refused = policy
            .filter("localhost.", [addr("127.0.0.1"), addr("::1")])
            .unwrap_err();
        assert_eq!(
            refused.to_string(),
            "fetching localhost. is refused: it is 127.0.0.1, a loopback address (web_fetch reaches public addresses only; the user can allow more with [plugins.web] allow_hosts or allow_private)"
        );
        let allowed = AddressPolicy {
            allow_private: false,
            allow_hosts: vec!["LocalHost".to_owned()],
        };
        assert_eq!(
            allowed.filter("localhost.", [addr("127.0.0.1")]).unwrap(),
            vec![addr("127.0.0.1")]
        );
        let open = AddressPolicy {
            allow_private: true,
            allow_hosts: Vec::new(),
        };
        assert!(open.filter("x", [addr("10.0.0.1")]).is_ok());
    }
}
