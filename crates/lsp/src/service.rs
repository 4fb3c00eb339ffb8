//! The LSP seam (`ctx.lsp`): providers register the file extensions they handle; a query is
//! routed on the file's final extension.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;

use futures::future::BoxFuture;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::error::LspError;
use crate::translate::Hover;
use crate::translate::Location;
use crate::translate::Position;

/// The four operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Operation {
    GoToDefinition,
    FindReferences,
    GoToImplementation,
    Hover,
}

impl Operation {
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "goToDefinition" => Self::GoToDefinition,
            "findReferences" => Self::FindReferences,
            "goToImplementation" => Self::GoToImplementation,
            "hover" => Self::Hover,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::GoToDefinition => "goToDefinition",
            Self::FindReferences => "findReferences",
            Self::GoToImplementation => "goToImplementation",
            Self::Hover => "hover",
        }
    }
}

/// One query as a provider receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LspQuery {
    pub operation: Operation,
    /// As the model gave it: relative to the workspace, or absolute.
    pub file_path: String,
    /// Zero-based, UTF-16 columns.
    pub position: Position,
    pub workspace_root: PathBuf,
    pub language_id: String,
}

/// A provider's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LspAnswer {
    Locations {
        locations: Vec<Location>,
        resolved_workspace_uri: String,
    },
    Hover(Option<Hover>),
}

/// A language-intelligence backend.
pub trait LspProvider: Send + Sync {
    fn query(
        &self,
        query: LspQuery,
        signal: CancellationToken,
    ) -> BoxFuture<'static, Result<LspAnswer, LspError>>;
}

struct Registered {
    id: String,
    extensions: BTreeMap<String, String>,
    provider: Arc<dyn LspProvider>,
}

/// The service.
#[derive(Default)]
pub struct LspService {
    providers: Mutex<Vec<Registered>>,
}

impl std::fmt::Debug for LspService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LspService").finish_non_exhaustive()
    }
}

fn invalid(message: String) -> LspError {
    LspError::new("LSP_INVALID_PROVIDER", message)
}

/// The final extension of a path (lower-cased, with its dot); `None` for a dotfile or no dot.
pub fn final_extension(path: &str) -> Option<String> {
    let name = path.rsplit(['/', '\\']).next().unwrap_or(path);
    let dot = name.rfind('.')?;
    (dot > 0).then(|| name[dot..].to_lowercase())
}

impl LspService {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Registers a provider for `extensions` (extension → language id), all or nothing. The
    /// returned closure unregisters it.
    pub fn register_provider(
        self: &Arc<Self>,
        id: &str,
        extensions: &[(String, String)],
        provider: Arc<dyn LspProvider>,
    ) -> Result<impl FnOnce() + Send + 'static, LspError> {
        if id.trim().is_empty() {
            return Err(invalid(
                "an LSP provider id must be a non-empty string".to_owned(),
            ));
        }
        if extensions.is_empty() {
            return Err(invalid(format!(
                "LSP provider \"{id}\" registers no file extensions"
            )));
        }
        let mut map = BTreeMap::new();
        for (raw, language) in extensions {
            let lower = raw.to_lowercase();
            let ext = if lower.starts_with('.') {
                lower
            } else {
                format!(".{lower}")
            };
            let valid = ext.len() > 1 && !ext[1..].contains(['.', '/', '\\']);
            if !valid {
                return Err(invalid(format!(
                    "LSP provider \"{id}\" maps an invalid extension \"{raw}\""
                )));
            }
            if language.trim().is_empty() {
                return Err(invalid(format!(
                    "LSP provider \"{id}\" maps extension \"{ext}\" to an empty language id"
                )));
            }
            if map.insert(ext.clone(), language.clone()).is_some() {
                return Err(invalid(format!(
                    "LSP provider \"{id}\" maps extension \"{ext}\" more than once"
                )));
            }
        }
        let mut providers = dsh_sync::lock(&self.providers);
        if providers.iter().any(|p| p.id == id) {
            return Err(LspError::new(
                "LSP_CONFLICT",
                format!("an LSP provider with id \"{id}\" is already registered"),
            ));
        }
        for ext in map.keys() {
            if providers.iter().any(|p| p.extensions.contains_key(ext)) {
                return Err(LspError::new(
                    "LSP_CONFLICT",
                    format!("extension \"{ext}\" is already handled by another LSP provider"),
                ));
            }
        }
        providers.push(Registered {
            id: id.to_owned(),
            extensions: map,
            provider,
        });
        let weak = Arc::downgrade(self);
        let id = id.to_owned();
        Ok(move || {
            if let Some(service) = weak.upgrade() {
                dsh_sync::lock(&service.providers).retain(|p| p.id != id);
            }
        })
    }

    /// Routes `query` (its `language_id` is filled in here) to the provider of its extension.
    pub fn query(
        &self,
        mut query: LspQuery,
        signal: CancellationToken,
    ) -> Result<BoxFuture<'static, Result<LspAnswer, LspError>>, LspError> {
        let unavailable = || {
            LspError::new(
                "LSP_UNAVAILABLE",
                format!("no LSP provider handles \"{}\"", query.file_path),
            )
        };
        let ext = final_extension(&query.file_path).ok_or_else(unavailable)?;
        let providers = dsh_sync::lock(&self.providers);
        let (provider, language) = providers
            .iter()
            .find_map(|p| {
                p.extensions
                    .get(&ext)
                    .map(|l| (p.provider.clone(), l.clone()))
            })
            .ok_or_else(unavailable)?;
        drop(providers);
        query.language_id = language;
        Ok(provider.query(query, signal))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Nothing;
    impl LspProvider for Nothing {
        fn query(
            &self,
            _query: LspQuery,
            _signal: CancellationToken,
        ) -> BoxFuture<'static, Result<LspAnswer, LspError>> {
            Box::pin(async { Ok(LspAnswer::Hover(None)) })
        }
    }

    fn map(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect()
    }

    #[test]
    fn registration_is_validated_all_or_nothing() {
        let service = LspService::new();
        let p: Arc<dyn LspProvider> = Arc::new(Nothing);
        let err = |r: Result<_, LspError>| r.err().map(|e| e.message).unwrap_or_default();
        assert_eq!(
            err(service.register_provider(" ", &map(&[(".ts", "ts")]), p.clone())),
            "an LSP provider id must be a non-empty string"
        );
        assert_eq!(
            err(service.register_provider("a", &[], p.clone())),
            "LSP provider \"a\" registers no file extensions"
        );
        assert_eq!(
            err(service.register_provider("a", &map(&[("t/s", "ts")]), p.clone())),
            "LSP provider \"a\" maps an invalid extension \"t/s\""
        );
        assert_eq!(
            err(service.register_provider("a", &map(&[(".ts", " ")]), p.clone())),
            "LSP provider \"a\" maps extension \".ts\" to an empty language id"
        );
        assert_eq!(
            err(service.register_provider("a", &map(&[(".TS", "ts"), (".ts", "ts")]), p.clone())),
            "LSP provider \"a\" maps extension \".ts\" more than once"
        );
        assert!(
            service
                .register_provider("a", &map(&[("ts", "typescript")]), p.clone())
                .is_ok()
        );
        assert_eq!(
            err(service.register_provider("a", &map(&[(".js", "js")]), p.clone())),
            "an LSP provider with id \"a\" is already registered"
        );
        assert_eq!(
            err(service.register_provider("b", &map(&[(".js", "js"), (".TS", "ts")]), p.clone())),
            "extension \".ts\" is already handled by another LSP provider"
        );
        // The failed registration left nothing behind.
        assert!(
            service
                .register_provider("c", &map(&[(".js", "js")]), p)
                .is_ok()
        );
    }

    #[test]
    fn routing_uses_the_final_extension() {
        assert_eq!(final_extension("src/a.test.TS").as_deref(), Some(".ts"));
        assert_eq!(final_extension("dir.d/.bashrc"), None);
        assert_eq!(final_extension("Makefile"), None);
        let service = LspService::new();
        service
            .register_provider("ts", &map(&[(".ts", "typescript")]), Arc::new(Nothing))
            .ok();
        let query = LspQuery {
            operation: Operation::Hover,
            file_path: "a.py".into(),
            position: Position {
                line: 0,
                character: 0,
            },
            workspace_root: PathBuf::from("/"),
            language_id: String::new(),
        };
        assert_eq!(
            service
                .query(query, CancellationToken::new())
                .err()
                .map(|e| e.message),
            Some("no LSP provider handles \"a.py\"".to_owned())
        );
    }
}
