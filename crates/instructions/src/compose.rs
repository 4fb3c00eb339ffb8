//! The baseline lifecycle and refresh (§2.4–§2.6): what instruction message, if any, a session
//! needs now, computed from the visible log state and the files.
//!
//! Machine state lives only in the logged `source.changes`; the in-memory cache keeps
//! `{path, version, digest, trimmed digest}` per scope (never prose), so an empty cache costs
//! one confirming read and nothing else.

use std::collections::HashMap;
use std::path::Path;
use std::path::PathBuf;

use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_protocol::MessageSource;
use serde_json::Map;
use serde_json::Value;

use crate::config::InstructionsConfig;
use crate::fs::FileVersion;
use crate::fs::InstructionFs;
use crate::fs::Probe;
use crate::fs::ReadOutcome;
use crate::fs::sha1_hex;
use crate::layout::Candidate;
use crate::layout::Layout;
use crate::render::EMPTY_REPLACEMENT_INTRO;
use crate::render::INTRO;
use crate::render::Section;
use crate::render::frame;
use crate::render::render;
use crate::render::replacement_intro;

/// `source.kind` of every instruction message.
pub const SOURCE_KIND: &str = "agent-instructions";

/// A change recorded in `source.changes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Set,
    Replace,
    Remove,
}

impl Action {
    fn as_str(self) -> &'static str {
        match self {
            Self::Set => "set",
            Self::Replace => "replace",
            Self::Remove => "remove",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        match text {
            "set" => Some(Self::Set),
            "replace" => Some(Self::Replace),
            "remove" => Some(Self::Remove),
            _ => None,
        }
    }
}

/// `{action, scope, path, digest?}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub action: Action,
    pub scope: String,
    pub path: String,
    pub digest: Option<String>,
}

impl Change {
    fn to_value(&self) -> Value {
        let mut map = Map::new();
        map.insert("action".into(), self.action.as_str().into());
        map.insert("scope".into(), self.scope.clone().into());
        map.insert("path".into(), self.path.clone().into());
        if let Some(digest) = &self.digest {
            map.insert("digest".into(), digest.clone().into());
        }
        Value::Object(map)
    }

    fn from_value(value: &Value) -> Option<Self> {
        Some(Self {
            action: Action::parse(value.get("action")?.as_str()?)?,
            scope: value.get("scope")?.as_str()?.to_owned(),
            path: value.get("path")?.as_str()?.to_owned(),
            digest: value
                .get("digest")
                .and_then(Value::as_str)
                .map(str::to_owned),
        })
    }
}

/// What the cache knows about a scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cached {
    Absent,
    Present {
        version: FileVersion,
        path: PathBuf,
        digest: String,
        trimmed: String,
    },
}

/// Per-session cache, keyed by scope.
pub type Cache = HashMap<String, Cached>;

/// `true` for a workspace-instruction message source.
pub fn is_instructions(source: &MessageSource) -> bool {
    source.kind() == SOURCE_KIND
}

/// The identity of a baseline message, when it is one.
pub fn baseline_identity(message: &Message) -> Option<&str> {
    let source = &message.source;
    if !is_instructions(source) || source.get("baseline") != Some(&Value::Bool(true)) {
        return None;
    }
    Some(
        source
            .get("baselineIdentity")
            .and_then(Value::as_str)
            .unwrap_or(""),
    )
}

fn changes_of(message: &Message) -> Vec<Change> {
    message
        .source
        .get("changes")
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(Change::from_value).collect())
        .unwrap_or_default()
}

/// The latest change per scope over `messages` (in order).
fn fold(messages: &[&Message]) -> HashMap<String, Change> {
    let mut active = HashMap::new();
    for message in messages {
        for change in changes_of(message) {
            active.insert(change.scope.clone(), change);
        }
    }
    active
}

/// Builds an instruction message.
pub fn instruction_message(
    blocks: Vec<String>,
    baseline: Option<&str>,
    changes: &[Change],
) -> Message {
    let mut map = Map::new();
    map.insert("kind".into(), SOURCE_KIND.into());
    map.insert("form".into(), "instructions".into());
    if let Some(identity) = baseline {
        map.insert("baseline".into(), true.into());
        map.insert("baselineIdentity".into(), identity.into());
    }
    map.insert(
        "changes".into(),
        Value::Array(changes.iter().map(Change::to_value).collect()),
    );
    let source = MessageSource::from_map(map).unwrap_or_else(|| MessageSource::plugin(SOURCE_KIND));
    Message::user(blocks.into_iter().map(ContentBlock::text).collect(), source)
}

/// `first` with `second`'s blocks and changes appended (one pending message, never two).
pub fn merge(first: &Message, second: &Message) -> Message {
    let mut changes = changes_of(first);
    changes.extend(changes_of(second));
    let mut map = first.source.as_map().clone();
    map.insert(
        "changes".into(),
        Value::Array(changes.iter().map(Change::to_value).collect()),
    );
    let mut merged = first.clone();
    merged.content.extend(second.content.iter().cloned());
    if let Some(source) = MessageSource::from_map(map) {
        merged.source = source;
    }
    merged
}

struct Loaded {
    candidate: Candidate,
    content: String,
    digest: String,
}

enum Delta {
    Set(String, String),
    Replace(String, String),
    Remove,
}

/// Computes instruction messages for one session.
pub struct Composer<'a> {
    pub config: &'a InstructionsConfig,
    pub fs: &'a dyn InstructionFs,
    pub layout: Layout,
}

impl<'a> Composer<'a> {
    pub fn new(config: &'a InstructionsConfig, fs: &'a dyn InstructionFs, cwd: &Path) -> Self {
        Self {
            layout: Layout::discover(fs, cwd, config),
            config,
            fs,
        }
    }

    fn max(&self) -> usize {
        self.config.max_bytes.unwrap_or(0)
    }

    fn read(&self, candidate: &Candidate) -> Option<String> {
        match self.fs.read(&candidate.path, self.config.max_source_bytes) {
            ReadOutcome::Text(text) => Some(text),
            ReadOutcome::TooLarge => {
                tracing::warn!(
                    path = %candidate.path.display(),
                    limit = self.config.max_source_bytes,
                    "workspace instructions: file is larger than maxSourceBytes; ignored"
                );
                None
            }
            ReadOutcome::Failed(error) => {
                tracing::warn!(path = %candidate.path.display(), %error, "workspace instructions: file cannot be read; ignored");
                None
            }
        }
    }

    fn probe(&self, candidate: &Candidate, cache: &Cache, fresh: bool) -> Probe {
        if !fresh {
            match cache.get(&candidate.scope) {
                Some(Cached::Absent) => return Probe::Absent,
                Some(Cached::Present { version, path, .. }) if *path == candidate.path => {
                    return Probe::Present(*version);
                }
                _ => {}
            }
        }
        self.fs.probe_file(&candidate.path)
    }

    /// Reads one present candidate and caches it: `(content, digest, trimmed digest)`.
    fn load(
        &self,
        candidate: &Candidate,
        version: FileVersion,
        cache: &mut Cache,
    ) -> Option<(String, String, String)> {
        let content = self.read(candidate)?;
        let digest = sha1_hex(&content);
        let trimmed = sha1_hex(content.trim());
        cache.insert(
            candidate.scope.clone(),
            Cached::Present {
                version,
                path: candidate.path.clone(),
                digest: digest.clone(),
                trimmed: trimmed.clone(),
            },
        );
        Some((content, digest, trimmed))
    }

    /// The chain's files with per-directory dedup of identical trimmed content.
    fn load_chain(&self, cache: &mut Cache, fresh: bool) -> Vec<Loaded> {
        let mut out: Vec<Loaded> = Vec::new();
        let mut kept: Vec<(String, String)> = Vec::new(); // (dir, trimmed digest)
        for candidate in self.layout.chain(self.config) {
            let version = match self.probe(&candidate, cache, fresh) {
                Probe::Present(version) => version,
                Probe::Absent => {
                    cache.insert(candidate.scope.clone(), Cached::Absent);
                    continue;
                }
                Probe::Unavailable(error) => {
                    tracing::warn!(path = %candidate.path.display(), %error, "workspace instructions: file unavailable; skipped");
                    continue;
                }
            };
            let Some((content, digest, trimmed)) = self.load(&candidate, version, cache) else {
                continue;
            };
            if kept
                .iter()
                .any(|(d, t)| *d == candidate.dir && *t == trimmed)
            {
                continue;
            }
            kept.push((candidate.dir.clone(), trimmed));
            out.push(Loaded {
                candidate,
                content,
                digest,
            });
        }
        out
    }

    /// Transitions of `candidates` against the active state (§2.5 reconciliation).
    fn reconcile(
        &self,
        candidates: &[Candidate],
        active: &HashMap<String, Change>,
        cache: &mut Cache,
        fresh: bool,
    ) -> Vec<(Candidate, Delta)> {
        let is_active = |scope: &str| {
            active
                .get(scope)
                .filter(|c| c.action != Action::Remove)
                .cloned()
        };
        let mut out = Vec::new();
        let mut groups: Vec<Vec<&Candidate>> = Vec::new();
        for candidate in candidates {
            match groups.last_mut() {
                Some(group) if group[0].dir == candidate.dir => group.push(candidate),
                _ => groups.push(vec![candidate]),
            }
        }
        for group in groups {
            let probes: Vec<Probe> = group.iter().map(|c| self.probe(c, cache, fresh)).collect();
            let unavailable = group
                .iter()
                .zip(&probes)
                .any(|(c, p)| matches!(p, Probe::Unavailable(_)) && is_active(&c.scope).is_some());
            if unavailable {
                // The whole directory keeps its last-good state this pass.
                continue;
            }
            let mut kept: Vec<String> = Vec::new();
            for (candidate, probe) in group.into_iter().zip(probes) {
                let current = is_active(&candidate.scope);
                let version = match probe {
                    Probe::Unavailable(_) => continue,
                    Probe::Absent => {
                        cache.insert(candidate.scope.clone(), Cached::Absent);
                        if current.is_some() {
                            out.push((candidate.clone(), Delta::Remove));
                        }
                        continue;
                    }
                    Probe::Present(version) => version,
                };
                if let Some(Cached::Present {
                    version: cached,
                    path,
                    digest,
                    trimmed,
                }) = cache.get(&candidate.scope)
                    && *cached == version
                    && *path == candidate.path
                    && current
                        .as_ref()
                        .is_some_and(|c| c.digest.as_deref() == Some(digest.as_str()))
                {
                    if kept.contains(trimmed) {
                        out.push((candidate.clone(), Delta::Remove));
                    } else {
                        kept.push(trimmed.clone());
                    }
                    continue;
                }
                let Some((content, digest, trimmed)) = self.load(candidate, version, cache) else {
                    continue;
                };
                if kept.contains(&trimmed) {
                    if current.is_some() {
                        out.push((candidate.clone(), Delta::Remove));
                    }
                    continue;
                }
                kept.push(trimmed);
                match current {
                    Some(c) if c.digest.as_deref() == Some(digest.as_str()) => {}
                    Some(_) => out.push((candidate.clone(), Delta::Replace(content, digest))),
                    None => out.push((candidate.clone(), Delta::Set(content, digest))),
                }
            }
        }
        out
    }

    /// One delta block and the changes it committed (`None` when nothing was represented).
    fn render_deltas(&self, deltas: Vec<(Candidate, Delta)>) -> Option<(String, Vec<Change>)> {
        if deltas.is_empty() {
            return None;
        }
        let sections: Vec<Section> = deltas
            .iter()
            .map(|(c, d)| match d {
                Delta::Set(content, _) => Section::added(&c.display, c.scope_label(), content),
                Delta::Replace(content, _) => Section::updated(&c.display, content),
                Delta::Remove => Section::removed(&c.display),
            })
            .collect();
        let rendered = render("", &sections, self.max());
        let changes: Vec<Change> = deltas
            .into_iter()
            .zip(&rendered.represented)
            .filter(|(_, represented)| **represented)
            .map(|((c, d), _)| {
                let (action, digest) = match d {
                    Delta::Set(_, digest) => (Action::Set, Some(digest)),
                    Delta::Replace(_, digest) => (Action::Replace, Some(digest)),
                    Delta::Remove => (Action::Remove, None),
                };
                Change {
                    action,
                    scope: c.scope,
                    path: c.display,
                    digest,
                }
            })
            .collect();
        (!changes.is_empty()).then_some((rendered.text, changes))
    }

    fn baseline_block(&self, intro: &str, files: &[Loaded]) -> (String, Vec<Change>) {
        let sections: Vec<Section> = files
            .iter()
            .map(|f| Section::baseline(&f.candidate.display, &f.content))
            .collect();
        let rendered = render(intro, &sections, self.max());
        let changes = files
            .iter()
            .zip(&rendered.represented)
            .filter(|(_, represented)| **represented)
            .map(|(f, _)| Change {
                action: Action::Set,
                scope: f.candidate.scope.clone(),
                path: f.candidate.display.clone(),
                digest: Some(f.digest.clone()),
            })
            .collect();
        (rendered.text, changes)
    }

    /// Candidates a touch or the active state asks to re-check, after `first`, deduplicated.
    fn extra_candidates(
        &self,
        first: &[Candidate],
        touched: &[PathBuf],
        active: &HashMap<String, Change>,
    ) -> Vec<Candidate> {
        let mut out: Vec<Candidate> = Vec::new();
        let mut seen: Vec<String> = first.iter().map(|c| c.scope.clone()).collect();
        let mut push = |candidate: Candidate, out: &mut Vec<Candidate>| {
            if !seen.contains(&candidate.scope) {
                seen.push(candidate.scope.clone());
                out.push(candidate);
            }
        };
        for file in touched {
            for dir in self.layout.touched_dirs(file) {
                for candidate in self.layout.dir_candidates(&dir, self.config) {
                    push(candidate, &mut out);
                }
            }
        }
        let mut scopes: Vec<&String> = active.keys().collect();
        scopes.sort();
        for scope in scopes {
            if let Some(candidate) = self.layout.from_scope(scope) {
                push(candidate, &mut out);
            }
        }
        out
    }

    /// The message the session needs now, if any.
    ///
    /// `surface`: instruction messages on the current surface; `authority`: instruction
    /// messages claimed or pending for this step (they count after the surface). `touched`:
    /// files a file tool just touched (probed fresh); otherwise the cache answers.
    pub fn compose(
        &self,
        cache: &mut Cache,
        surface: &[&Message],
        authority: &[&Message],
        touched: &[PathBuf],
        fresh: bool,
    ) -> Option<Message> {
        self.config.max_bytes?;
        let all: Vec<&Message> = surface.iter().chain(authority).copied().collect();
        let active = fold(&all);
        let visible = authority
            .iter()
            .rev()
            .chain(surface.iter().rev())
            .find_map(|m| baseline_identity(m));
        let identity = self.config.identity(&self.layout.cwd, &self.layout.root);
        let chain = self.layout.chain(self.config);
        match visible {
            None => {
                let files = self.load_chain(cache, fresh);
                let extra = self.extra_candidates(&chain, touched, &active);
                let deltas = self.reconcile(&extra, &active, cache, true);
                let delta = self.render_deltas(deltas);
                if files.is_empty() && delta.is_none() {
                    return None;
                }
                let mut blocks = Vec::new();
                let mut changes = Vec::new();
                if !files.is_empty() {
                    let (text, baseline_changes) = self.baseline_block(INTRO, &files);
                    blocks.push(text);
                    changes.extend(baseline_changes);
                }
                let baseline = (!files.is_empty()).then_some(identity.as_str());
                if let Some((text, delta_changes)) = delta {
                    blocks.push(text);
                    changes.extend(delta_changes);
                }
                Some(instruction_message(blocks, baseline, &changes))
            }
            Some(previous) if previous != identity => {
                let files = self.load_chain(cache, true);
                let kept: Vec<&str> = files.iter().map(|f| f.candidate.scope.as_str()).collect();
                let mut scopes: Vec<&Change> = active
                    .values()
                    .filter(|c| c.action != Action::Remove && !kept.contains(&c.scope.as_str()))
                    .collect();
                scopes.sort_by(|a, b| a.scope.cmp(&b.scope));
                let mut changes: Vec<Change> = scopes
                    .into_iter()
                    .map(|c| Change {
                        action: Action::Remove,
                        scope: c.scope.clone(),
                        path: c.path.clone(),
                        digest: None,
                    })
                    .collect();
                let text = if files.is_empty() {
                    frame(EMPTY_REPLACEMENT_INTRO)
                } else {
                    let (text, set) = self.baseline_block(&replacement_intro(), &files);
                    changes.extend(set);
                    text
                };
                Some(instruction_message(vec![text], Some(&identity), &changes))
            }
            Some(_) => {
                let mut candidates = chain.clone();
                candidates.extend(self.extra_candidates(&chain, touched, &active));
                let deltas = self.reconcile(&candidates, &active, cache, fresh);
                let (text, changes) = self.render_deltas(deltas)?;
                Some(instruction_message(vec![text], None, &changes))
            }
        }
    }
}

#[cfg(test)]
#[path = "compose_tests.rs"]
mod tests;
