//! Server declarations: the `[[mcp.servers]]` rows of dsh's config file and the ACP
//! `session/new` `mcpServers` entries, both normalised into [`McpServerConfig`].

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::Serialize;
use serde_json::Value;

use crate::error::ConfigError;

/// Default per-call deadline (`toolCallTimeoutMs`).
pub const DEFAULT_TIMEOUT_MS: u64 = 60_000;

/// One MCP server. Exactly one of `command` (stdio) and `url` (streamable HTTP, or the legacy
/// HTTP+SSE transport with `transport = "sse"`) is set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// `^[A-Za-z0-9_-]{1,32}$`; the middle part of `mcp__<name>__<tool>`.
    pub name: String,
    /// `stdio`, `streamable-http` (also `http`) or `sse`; `type` is accepted as its name, as
    /// in other clients' server files. Unset: stdio with a `command`, streamable HTTP with a
    /// `url`. Only `sse` needs saying: its URL looks like any other.
    #[serde(default, alias = "type", skip_serializing_if = "Option::is_none")]
    pub transport: Option<TransportKind>,
    /// stdio: the program to spawn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Added to the scrubbed parent environment (see [`scrubbed_env`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Working directory of the child; unset means dsh's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// streamable HTTP: the endpoint (for example `http://127.0.0.1:3001/mcp`); SSE: the event
    /// stream (for example `http://127.0.0.1:3001/sse`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Sent on every HTTP request.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// A disabled server is listed but never started.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Deadline of one `tools/call`, in milliseconds. Connecting and listing get at least
    /// [`McpServerConfig::connect_timeout`].
    #[serde(default = "default_timeout")]
    pub timeout_ms: u64,
    /// Refuse to mount (instead of mounting empty and reconnecting) when the first connect fails.
    #[serde(default)]
    pub fail_on_startup_error: bool,
    #[serde(default)]
    pub reconnect: ReconnectConfig,
}

/// Exponential backoff after a disconnect or a failed connect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReconnectConfig {
    pub enabled: bool,
    pub initial_delay_ms: u64,
    pub max_delay_ms: u64,
    /// Consecutive failures after which the server's tools are unregistered for good.
    pub max_attempts: u32,
    /// HTTP transports only: how often an idle session is pinged, so a dead server is noticed
    /// without waiting for a call. 0 turns it off. A stdio server's death is seen at once (its
    /// pipe closes); so is an SSE server's that closes its stream, the ping covers a silent one.
    pub ping_interval_ms: u64,
}

impl Default for ReconnectConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            initial_delay_ms: 500,
            max_delay_ms: 30_000,
            max_attempts: 10,
            ping_interval_ms: 15_000,
        }
    }
}

fn yes() -> bool {
    true
}
fn default_timeout() -> u64 {
    DEFAULT_TIMEOUT_MS
}

/// The `transport` a row names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TransportKind {
    Stdio,
    #[serde(alias = "http")]
    StreamableHttp,
    /// The legacy HTTP+SSE transport (protocol 2024-11-05).
    Sse,
}

impl TransportKind {
    fn as_str(self) -> &'static str {
        match self {
            TransportKind::Stdio => "stdio",
            TransportKind::StreamableHttp => "streamable-http",
            TransportKind::Sse => "sse",
        }
    }
}

/// How a server is reached, after validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<String>,
    },
    StreamableHttp {
        url: String,
        headers: BTreeMap<String, String>,
    },
    /// The legacy HTTP+SSE transport: `url` is the event stream.
    Sse {
        url: String,
        headers: BTreeMap<String, String>,
    },
}

impl Transport {
    /// `stdio`, `streamable-http` or `sse`, as `dsh mcp list` shows it.
    pub fn kind(&self) -> &'static str {
        match self {
            Transport::Stdio { .. } => "stdio",
            Transport::StreamableHttp { .. } => "streamable-http",
            Transport::Sse { .. } => "sse",
        }
    }
}

impl McpServerConfig {
    /// A stdio server with defaults for everything else.
    pub fn stdio(name: impl Into<String>, command: impl Into<String>, args: Vec<String>) -> Self {
        Self {
            command: Some(command.into()),
            args,
            ..Self::empty(name.into())
        }
    }

    /// A streamable-HTTP server with defaults for everything else.
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> Self {
        Self {
            url: Some(url.into()),
            ..Self::empty(name.into())
        }
    }

    /// A legacy HTTP+SSE server (`url` is its event stream) with defaults for everything else.
    pub fn sse(name: impl Into<String>, url: impl Into<String>) -> Self {
        Self {
            transport: Some(TransportKind::Sse),
            ..Self::http(name, url)
        }
    }

    fn empty(name: String) -> Self {
        Self {
            name,
            transport: None,
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            cwd: None,
            url: None,
            headers: BTreeMap::new(),
            enabled: true,
            timeout_ms: DEFAULT_TIMEOUT_MS,
            fail_on_startup_error: false,
            reconnect: ReconnectConfig::default(),
        }
    }

    /// Deadline of `initialize` and of one `tools/list`: never below 30 s, since a cold
    /// `npx` start alone can take that long, and never below the per-call deadline.
    pub fn connect_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.timeout_ms.max(30_000))
    }

    /// Checks the name and picks the transport.
    pub fn validate(&self) -> Result<Transport, ConfigError> {
        validate_name(&self.name)?;
        if self.timeout_ms == 0 {
            return Err(ConfigError::ZeroTimeout {
                server: self.name.clone(),
            });
        }
        let needs = |field: &'static str, kind: TransportKind| ConfigError::TransportNeeds {
            server: self.name.clone(),
            transport: kind.as_str(),
            field,
        };
        match (&self.command, &self.url) {
            (Some(command), None) if !command.is_empty() => match self.transport {
                None | Some(TransportKind::Stdio) => Ok(Transport::Stdio {
                    command: command.clone(),
                    args: self.args.clone(),
                    env: self.env.clone(),
                    cwd: self.cwd.clone().filter(|c| !c.is_empty()),
                }),
                Some(kind) => Err(needs("url", kind)),
            },
            (None, Some(url)) if !url.is_empty() => {
                if self.transport == Some(TransportKind::Stdio) {
                    return Err(needs("command", TransportKind::Stdio));
                }
                if !self.args.is_empty() || !self.env.is_empty() || self.cwd.is_some() {
                    return Err(ConfigError::StdioFieldsOnHttp {
                        server: self.name.clone(),
                    });
                }
                let (url, headers) = (url.clone(), self.headers.clone());
                Ok(match self.transport {
                    Some(TransportKind::Sse) => Transport::Sse { url, headers },
                    _ => Transport::StreamableHttp { url, headers },
                })
            }
            (Some(_), Some(_)) => Err(ConfigError::BothTransports {
                server: self.name.clone(),
            }),
            _ => Err(ConfigError::NoTransport {
                server: self.name.clone(),
            }),
        }
    }

    /// Converts one ACP `session/new` `mcpServers` entry (its JSON wire shape):
    /// stdio `{name, command, args, env:[{name,value}]}`, `{type:"http", name, url,
    /// headers:[{name,value}]}` or the same with `type:"sse"`. Takes JSON so this crate does not
    /// depend on the ACP schema crate: pass `serde_json::to_value(&server)`.
    pub fn from_acp(entry: &Value) -> Result<Self, ConfigError> {
        let bad = |why: &str| ConfigError::InvalidAcpServer {
            reason: why.to_owned(),
        };
        let object = entry.as_object().ok_or_else(|| bad("not an object"))?;
        let name = object
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("missing string \"name\""))?;
        let pairs = |key: &str| -> Result<BTreeMap<String, String>, ConfigError> {
            let mut out = BTreeMap::new();
            let Some(list) = object.get(key) else {
                return Ok(out);
            };
            let list = list
                .as_array()
                .ok_or_else(|| bad(&format!("\"{key}\" must be an array")))?;
            for item in list {
                let pair = (
                    item.get("name").and_then(Value::as_str),
                    item.get("value").and_then(Value::as_str),
                );
                let (Some(k), Some(v)) = pair else {
                    return Err(bad(&format!(
                        "\"{key}\" entries must be {{name, value}} strings"
                    )));
                };
                out.insert(k.to_owned(), v.to_owned());
            }
            Ok(out)
        };
        let config = match object.get("type").and_then(Value::as_str) {
            None | Some("stdio") => {
                let command = object
                    .get("command")
                    .and_then(Value::as_str)
                    .ok_or_else(|| bad("missing string \"command\""))?;
                let args = match object.get("args") {
                    None => Vec::new(),
                    Some(Value::Array(items)) => items
                        .iter()
                        .map(|a| a.as_str().map(str::to_owned))
                        .collect::<Option<Vec<_>>>()
                        .ok_or_else(|| bad("\"args\" must be strings"))?,
                    Some(_) => return Err(bad("\"args\" must be an array")),
                };
                Self {
                    env: pairs("env")?,
                    ..Self::stdio(name, command, args)
                }
            }
            Some(kind @ ("http" | "sse")) => {
                let url = object
                    .get("url")
                    .and_then(Value::as_str)
                    .ok_or_else(|| bad("missing string \"url\""))?;
                let base = if kind == "sse" {
                    Self::sse(name, url)
                } else {
                    Self::http(name, url)
                };
                Self {
                    headers: pairs("headers")?,
                    ..base
                }
            }
            Some(other) => {
                return Err(ConfigError::UnsupportedAcpTransport {
                    server: name.to_owned(),
                    transport: other.to_owned(),
                });
            }
        };
        config.validate()?;
        Ok(config)
    }
}

fn validate_name(name: &str) -> Result<(), ConfigError> {
    let ok = (1..=32).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(ConfigError::InvalidName {
            name: name.to_owned(),
        })
    }
}

/// The parent environment through the shared child filter (`dsh_secrets::filter_env`: no
/// credential-like name, no registered secret value, no `DSH_*` setting), plus `extra`.
pub fn scrubbed_env(
    parent: impl IntoIterator<Item = (String, String)>,
    extra: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    dsh_process::ChildEnv::filtered(parent)
        .with(extra.clone())
        .into_vars()
        .into_iter()
        .collect()
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
