//! What can stop the server from starting or serving.

use std::net::SocketAddr;

#[derive(Debug, thiserror::Error)]
pub enum WebError {
    #[error(
        "refusing to serve on {addr} without an access secret: anyone who can reach this \
         address could drive your agent. Set DSH_ACCESS_SECRET (at least 16 characters), or \
         bind to loopback (--host 127.0.0.1) and reach it through an SSH tunnel"
    )]
    SecretRequired { addr: SocketAddr },
    #[error("the access secret is too short ({len} characters): use at least 16")]
    SecretTooShort { len: usize },
    #[error("the server failed: {0}")]
    Io(#[from] std::io::Error),
}
