//! The crate's error type and the JSON-RPC error texts the bridge puts on the wire.
//!
//! Wire errors follow the reference bridge exactly: `invalidParams(detail)` becomes
//! `{"code":-32602,"message":"Invalid params: <detail>"}` and `internalError(detail)` becomes
//! `{"code":-32603,"message":"Internal error: <detail>"}`, with no `data`.

use agent_client_protocol::Error as RpcError;
use agent_client_protocol::ErrorCode;

/// Failures of the bridge as a whole (not of one request: those are JSON-RPC errors).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AcpError {
    /// The transport or the protocol engine failed.
    #[error("ACP connection failed: {0}")]
    Connection(#[from] RpcError),
}

/// A failure of a host call (create, load, list, a mode switch, a route lookup); its text
/// reaches the client verbatim inside the JSON-RPC error message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Failure {
    /// The request is wrong for this host (wrong cwd, unknown id, unsupported option):
    /// answered as invalid params.
    #[error("{0}")]
    Invalid(String),
    /// The host failed (I/O, configuration): answered as an internal error.
    #[error("{0}")]
    Internal(String),
    /// The agent has no usable model credentials: answered as `auth_required` (-32000), so
    /// the client offers the advertised authentication methods.
    #[error("{0}")]
    AuthRequired(String),
    /// No stored session has this id: answered as ACP's session-not-found (-32002).
    #[error("unknown session: {0}")]
    NotFound(String),
    /// The session is in use and cannot be removed now: answered as invalid params.
    #[error("{0}")]
    Busy(String),
}

impl Failure {
    pub(crate) fn invalid(detail: impl Into<String>) -> Self {
        Self::Invalid(detail.into())
    }

    pub(crate) fn internal(detail: impl Into<String>) -> Self {
        Self::Internal(detail.into())
    }

    pub(crate) fn auth_required(detail: impl Into<String>) -> Self {
        Self::AuthRequired(detail.into())
    }

    pub(crate) fn into_rpc(self) -> RpcError {
        match self {
            Self::Invalid(detail) => invalid_params(detail),
            Self::Internal(detail) => internal_error(detail),
            Self::AuthRequired(detail) => auth_required(detail),
            Self::NotFound(session_id) => session_not_found(&session_id),
            Self::Busy(detail) => invalid_params(detail),
        }
    }
}

/// `RequestError.invalidParams(detail)`.
pub fn invalid_params(detail: impl AsRef<str>) -> RpcError {
    RpcError::new(
        ErrorCode::INVALID_PARAMS,
        format!("Invalid params: {}", detail.as_ref()),
    )
}

/// `internalError(detail)`.
pub fn internal_error(detail: impl AsRef<str>) -> RpcError {
    RpcError::new(
        ErrorCode::INTERNAL_ERROR,
        format!("Internal error: {}", detail.as_ref()),
    )
}

/// ACP's `auth_required` (-32000): the client should authenticate (see `authMethods`).
pub fn auth_required(detail: impl AsRef<str>) -> RpcError {
    RpcError::new(
        ErrorCode::AUTH_REQUIRED,
        format!("Authentication required: {}", detail.as_ref()),
    )
}

/// ACP's "session not found" (-32002, `sessionId` in `data`): what `session/close` and
/// `session/delete` answer for a session they do not know (clients treat it as done).
pub fn session_not_found(session_id: &str) -> RpcError {
    RpcError::new(
        ErrorCode::RESOURCE_NOT_FOUND,
        format!("Resource not found: {}", texts::unknown_session(session_id)),
    )
    .data(serde_json::json!({ "sessionId": session_id }))
}

/// Failure codes of a model turn that mean "no usable credentials here". A provider's own
/// refusal (HTTP 401, `AUTH`) stays `turn failed`, as the reference answers it.
pub(crate) const CREDENTIAL_CODES: [&str; 2] = ["MISSING_CREDENTIAL", "INVALID_CREDENTIAL"];

/// Exact detail texts of the admission and settlement errors (§1A).
pub mod texts {
    pub const DISPOSED: &str = "the ACP bridge has been disposed";
    pub const ADDITIONAL_DIRECTORIES: &str = "additionalDirectories is not supported";
    pub const MCP_SERVERS: &str = "mcpServers is not supported";
    pub const IN_FLIGHT: &str = "a prompt is already in flight for this session";
    pub const EMPTY_PROMPT: &str = "empty prompt";
    pub const IMAGE_NOT_ADVERTISED: &str =
        "inline image prompts were not advertised by this connection";
    pub const IMAGE_MIME_TYPE: &str =
        "image mimeType must be image/png, image/jpeg, image/webp, or image/gif";
    pub const IMAGE_BASE64: &str = "image data must be canonical base64";
    pub const IMAGE_PERSIST: &str = "unable to persist the prompt image batch";
    /// dsh's wording (the reference names no text): the session's route is unknown.
    pub const IMAGE_ROUTE_UNRESOLVED: &str =
        "inline image prompts need a model route, and the current one could not be resolved";
    pub const AUDIO: &str = "audio prompt content is not supported";
    pub const RESOURCE: &str =
        "this kind of embedded resource is not supported; embed text or blob contents";
    pub const AGENT_DISPOSED: &str =
        "prompt was not queued: the agent was disposed outside the bridge";
    pub const CURSOR: &str = "session/list cursors are not supported";
    pub const LOGGED_OUT: &str =
        "this connection logged out; call authenticate to open or prompt sessions again";

    pub fn cwd_not_absolute(cwd: &str) -> String {
        format!("cwd must be an absolute path: {cwd}")
    }

    pub fn cwd_not_a_folder(cwd: &str, problem: &str) -> String {
        format!("cwd is not an existing folder: {cwd} ({problem})")
    }

    pub fn resource_base64(uri: &str) -> String {
        format!("embedded resource {uri}: blob must be base64")
    }

    /// dsh's wording: a binary blob that is neither text nor an accepted image.
    pub fn binary_resource(uri: &str, mime_type: Option<&str>) -> String {
        let kind = mime_type.unwrap_or("no mimeType");
        format!(
            "embedded resource {uri} ({kind}) is binary and the model takes only text and images; send its text, or a resource_link the agent can read"
        )
    }

    pub fn unknown_session(id: &str) -> String {
        format!("unknown session: {id}")
    }

    pub fn not_queued(detail: &str) -> String {
        format!("prompt was not queued: {detail}")
    }

    /// dsh's wording (the reference names no text), after `read_image`'s gate message.
    pub fn no_image_input(model: &str) -> String {
        format!(
            "model \"{model}\" does not declare image input; switch to an image-capable model to send images"
        )
    }

    pub fn turn_failed(message: &str) -> String {
        format!("turn failed: {message}")
    }

    pub fn delivery_failed(message: &str) -> String {
        format!("assistant output delivery failed: {message}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_errors_have_the_reference_shape() {
        let error = invalid_params(texts::ADDITIONAL_DIRECTORIES);
        assert_eq!(
            serde_json::to_string(&error).unwrap(),
            r#"{"code":-32602,"message":"Invalid params: additionalDirectories is not supported"}"#
        );
        let error = internal_error(texts::turn_failed("simulated provider error (HTTP 401)"));
        assert_eq!(
            serde_json::to_string(&error).unwrap(),
            r#"{"code":-32603,"message":"Internal error: turn failed: simulated provider error (HTTP 401)"}"#
        );
    }
}
