//! `dsh-kernel`: the plugin kernel of dsh.
//!
//! Owns: the scope tree (root → plugin → agent) and the disposers every registration returns,
//! typed services, the three hook kinds ([`Waterfall`] middleware with [`Next`], [`Serial`],
//! [`Observe`]), and the [`Plugin`] trait with mount / hot-reload ([`mount`], [`Mounted`]).
//! Does not own: any concrete hook, service or plugin; tools, models, sessions.
//! Must not depend on: any other `dsh-*` crate but `dsh-sync` (std-only locking), an async
//! runtime (futures are plain boxed futures; the caller's executor polls them).
//!
//! Invariants: disposing a scope undoes everything registered through it, children first and
//! newest first, each effect exactly once; no kernel lock is held while user code runs.
//!
//! # Example
//! ```
//! use std::sync::Arc;
//! use dsh_kernel::{Observe, Plugin, PluginError, Scope, mount};
//!
//! trait Greeter: Send + Sync { fn greet(&self) -> String; }
//! struct English;
//! impl Greeter for English { fn greet(&self) -> String { "hello".into() } }
//!
//! #[derive(serde::Deserialize)]
//! struct Config { loud: bool }
//!
//! struct Greeting { started: Arc<Observe<String>> }
//! impl Plugin for Greeting {
//!     type Config = Config;
//!     fn name(&self) -> &str { "greeting" }
//!     fn apply(&self, ctx: &Scope, config: Config) -> Result<(), PluginError> {
//!         ctx.provide::<dyn Greeter>(Arc::new(English))?;
//!         let loud = config.loud;
//!         self.started.register(ctx, move |who| {
//!             tracing::info!(loud, "{who} started");
//!             Ok(())
//!         });
//!         Ok(())
//!     }
//! }
//!
//! let root = Scope::root();
//! let started = Arc::new(Observe::<String>::new("agent/started"));
//! let plugin = Arc::new(Greeting { started: started.clone() });
//! let mounted = mount(&root, plugin, serde_json::json!({ "loud": true }))?;
//! assert_eq!(root.service::<dyn Greeter>().map(|g| g.greet()).as_deref(), Some("hello"));
//! assert_eq!(started.len(), 1);
//!
//! mounted.reapply(serde_json::json!({ "loud": false }))?; // hot reload: dispose + apply
//! assert_eq!(started.len(), 1);
//!
//! root.dispose(); // undoes everything, newest first
//! assert!(root.service::<dyn Greeter>().is_none());
//! assert!(started.is_empty());
//! # Ok::<(), PluginError>(())
//! ```

#![deny(missing_docs)]

mod error;
mod hooks;
mod plugin;
mod scope;
mod service;

pub use error::{HookError, KernelError, PluginError};
pub use hooks::{Next, Observe, Serial, Waterfall};
pub use plugin::{AnyPlugin, Mounted, Plugin, mount};
pub use scope::{Disposer, Scope, ScopeId, ScopeKind};

/// The boxed, `Send` future used at every `dyn` boundary in dsh.
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn Future<Output = T> + Send + 'a>>;
