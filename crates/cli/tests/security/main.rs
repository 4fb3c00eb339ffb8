//! The sandbox, the trust rule and the key, attacked through the real `dsh` binary by a
//! scripted model, as root and as an unprivileged user (issue #11). Each test reproduces one
//! way out that existed; see `docs/security.md` for what each mode promises.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod areas;
mod blocking;
mod children;
mod durable;
mod escapes;
mod faults;
mod growth;
mod kernel;
mod key;
mod limits;
mod persistence;
mod spawn;
mod support;
mod terminal;
mod trust;
mod web;
