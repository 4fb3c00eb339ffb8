//! `dsh-presets`: named agent configurations and their personas (context-spec §12.4).
//!
//! Owns: the persona row (template, `complete`, `include_runtime_context`) and how it shapes an
//! agent's prompt; the preset roster (built-in presets, preset folders under configured roots
//! and `<dshHome>/.agent-presets`, ids, display metadata, the default); what a preset changes
//! for its agents (persona, tool filter, tool presentation mode); the durable
//! `agent-preset/selected` record of a switch and the fold that reads it back (resume and fork
//! see the preset the log says); the `/preset` command; and the `[plugins.agent-presets]`
//! plugin that applies the session's preset as a per-session piece, re-applied on a switch.
//! Does not own: the command registry, the per-session re-apply mechanism (`dsh-plugin`).
//! Must not depend on: front-ends, the host.

mod plugin;

pub use plugin::AgentPresets;
pub use plugin::PresetsPlugin;
pub use plugin::SelectError;

use std::path::Path;
use std::path::PathBuf;

use dsh_session::data::EventData;
use dsh_tools::PresentationMode;
use serde::Deserialize;
use serde::Serialize;

/// A load error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PresetError(pub String);

/// The persona row: the `deployment:persona` section of a preset's agents.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct Persona {
    /// A template (`{{model}}`, `{{cwd}}`, `{{provider}}`).
    pub text: String,
    /// The persona is the only system-prompt section.
    #[serde(default)]
    pub complete: bool,
    /// `false` suppresses runtime-context snapshots for these agents.
    #[serde(default = "yes", alias = "includeRuntimeContext")]
    pub include_runtime_context: bool,
}

fn yes() -> bool {
    true
}

/// Where a preset came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PresetOrigin {
    Builtin,
    /// A preset folder; `trusted` roots may start processes and widen policy.
    Folder {
        path: PathBuf,
        trusted: bool,
    },
}

/// One preset.
#[derive(Debug, Clone, PartialEq)]
pub struct Preset {
    pub id: String,
    pub name: Option<String>,
    pub description: Option<String>,
    pub persona: Option<Persona>,
    /// What the preset changes about its agents' tools.
    pub tools: PresetTools,
    pub origin: PresetOrigin,
}

/// `[tools]` of a preset: which tools its agents are offered and how they reach them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PresetTools {
    /// Only these tools (of those the session would offer).
    #[serde(default)]
    pub allow: Option<Vec<String>>,
    /// Never these tools.
    #[serde(default)]
    pub deny: Option<Vec<String>>,
    /// `native`, `code` or `both`; absent keeps the configured `tools.mode`.
    #[serde(default)]
    pub mode: Option<PresentationMode>,
}

impl PresetTools {
    /// Whether the preset leaves the tools alone.
    pub fn is_empty(&self) -> bool {
        self.allow.is_none() && self.deny.is_none() && self.mode.is_none()
    }
}

impl Preset {
    /// What a picker shows.
    pub fn title(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.id)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PresetFile {
    name: Option<String>,
    description: Option<String>,
    persona: Option<Persona>,
    #[serde(default)]
    tools: PresetTools,
}

/// `[a-z0-9][a-z0-9-]*`.
pub fn valid_id(id: &str) -> bool {
    let mut bytes = id.bytes();
    matches!(bytes.next(), Some(b'a'..=b'z' | b'0'..=b'9'))
        && bytes.all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'-'))
}

/// The preset file name inside a preset folder.
pub const PRESET_FILE: &str = "preset.toml";

/// Reads one preset folder.
pub fn read_preset(dir: &Path, trusted: bool) -> Result<Preset, PresetError> {
    let id = dir
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|id| valid_id(id))
        .ok_or_else(|| PresetError(format!("{}: not a preset id", dir.display())))?
        .to_owned();
    let path = dir.join(PRESET_FILE);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| PresetError(format!("{}: {e}", path.display())))?;
    let file: PresetFile = toml::from_str(&text)
        .map_err(|e| PresetError(format!("{}: {}", path.display(), e.message())))?;
    if [&file.tools.allow, &file.tools.deny]
        .into_iter()
        .flatten()
        .flatten()
        .any(|name| name == "run_code")
    {
        return Err(PresetError(format!(
            "{}: tools: run_code cannot be allowed or denied (use tools.mode)",
            path.display()
        )));
    }
    Ok(Preset {
        id,
        name: file.name,
        description: file.description,
        persona: file.persona,
        tools: file.tools,
        origin: PresetOrigin::Folder {
            path: dir.to_path_buf(),
            trusted,
        },
    })
}

/// The `standard` preset's id: the composition as configured.
pub const STANDARD: &str = "standard";

/// The persona of the `minimal` preset (model-facing prose, ours).
pub const MINIMAL_PERSONA: &str = "You are a coding assistant powered by the {{model}} model. Your working directory is {{cwd}}. Answer directly, and use a tool only when the task needs it.";

/// The presets dsh ships. `standard` changes nothing, so a session on the default preset sees
/// exactly the configured composition (`[prompt] persona`, `tools.mode`).
pub fn builtin_presets() -> Vec<Preset> {
    vec![
        Preset {
            id: STANDARD.into(),
            name: Some("Standard".into()),
            description: Some("The configured tools, prompt and persona.".into()),
            persona: None,
            tools: PresetTools::default(),
            origin: PresetOrigin::Builtin,
        },
        Preset {
            id: "code".into(),
            name: Some("Code".into()),
            description: Some("Tools are called from programs through run_code.".into()),
            persona: None,
            tools: PresetTools {
                mode: Some(PresentationMode::Code),
                ..PresetTools::default()
            },
            origin: PresetOrigin::Builtin,
        },
        Preset {
            id: "minimal".into(),
            name: Some("Minimal".into()),
            description: Some("The persona is the whole system prompt.".into()),
            persona: Some(Persona {
                text: MINIMAL_PERSONA.into(),
                complete: true,
                include_runtime_context: true,
            }),
            tools: PresetTools::default(),
            origin: PresetOrigin::Builtin,
        },
    ]
}

/// A preset root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PresetRoot {
    pub path: PathBuf,
    /// Recorded on the presets it holds; no preset key can widen policy or start a process,
    /// so nothing is refused for an untrusted root today.
    #[serde(default)]
    pub trust: bool,
}

/// `[plugins.agent-presets]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PresetsConfig {
    /// The preset of a new session.
    pub default: String,
    /// Preset folders, searched before `<dshHome>/.agent-presets`.
    pub roots: Vec<PresetRoot>,
    /// Whether `<dshHome>/.agent-presets` is searched.
    pub include_user_root: bool,
}

impl Default for PresetsConfig {
    fn default() -> Self {
        Self {
            default: STANDARD.to_owned(),
            roots: Vec::new(),
            include_user_root: true,
        }
    }
}

/// The roster: built-ins, then folders (a folder preset replaces a built-in of the same id;
/// an earlier root wins over a later one).
#[derive(Debug, Clone, PartialEq)]
pub struct PresetRoster {
    presets: Vec<Preset>,
    default: String,
}

impl PresetRoster {
    /// Discovers presets under the configured roots, then `<dsh_home>/.agent-presets` (a user
    /// root, trusted). Unreadable preset folders are skipped with a warning.
    pub fn discover(config: &PresetsConfig, dsh_home: &Path) -> Result<Self, PresetError> {
        let mut presets = builtin_presets();
        let mut roots = config.roots.clone();
        if config.include_user_root {
            roots.push(PresetRoot {
                path: dsh_home.join(".agent-presets"),
                trust: true,
            });
        }
        let mut seen: Vec<String> = Vec::new();
        for root in roots {
            let Ok(read) = std::fs::read_dir(&root.path) else {
                continue;
            };
            let mut dirs: Vec<PathBuf> = read
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.join(PRESET_FILE).is_file())
                .collect();
            dirs.sort();
            for dir in dirs {
                match read_preset(&dir, root.trust) {
                    Ok(preset) if seen.contains(&preset.id) => {
                        tracing::debug!(id = %preset.id, "preset shadowed by an earlier root");
                    }
                    Ok(preset) => {
                        seen.push(preset.id.clone());
                        presets.retain(|p| p.id != preset.id);
                        presets.push(preset);
                    }
                    Err(error) => tracing::warn!(%error, "preset skipped"),
                }
            }
        }
        presets.sort_by(|a, b| a.id.cmp(&b.id));
        if !presets.iter().any(|p| p.id == config.default) {
            return Err(PresetError(format!(
                "agent-presets: default preset \"{}\" is not in the roster ({})",
                config.default,
                presets
                    .iter()
                    .map(|p| p.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        Ok(Self {
            presets,
            default: config.default.clone(),
        })
    }

    pub fn list(&self) -> &[Preset] {
        &self.presets
    }

    pub fn get(&self, id: &str) -> Option<&Preset> {
        self.presets.iter().find(|p| p.id == id)
    }

    pub fn default_id(&self) -> &str {
        &self.default
    }

    /// The preset an agent uses: `requested` when known, else the default.
    pub fn resolve(&self, requested: Option<&str>) -> Result<&Preset, PresetError> {
        let id = requested.unwrap_or(&self.default);
        self.get(id).ok_or_else(|| {
            PresetError(format!(
                "unknown agent preset \"{id}\" (known: {})",
                self.presets
                    .iter()
                    .map(|p| p.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })
    }
}

/// `agent-preset/selected {preset}`: a blank agent switched preset (the preset decides
/// model-visible tools and sections, so the switch is durable).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PresetSelected {
    pub preset: String,
}

impl EventData for PresetSelected {
    const KIND: &'static str = "agent-preset/selected";
}

/// The `/preset` command.
pub const PRESET_COMMAND: &str = "preset";
pub const PRESET_DESCRIPTION: &str = "Show or switch the agent preset";
pub const PRESET_HINT: &str = "[<preset>]";

/// What `/preset <args>` should do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PresetAction {
    /// Show this text (success).
    Show(String),
    /// Switch to this preset id (the caller recomposes and logs [`PresetSelected`]).
    Switch(String),
    /// Refuse with this text.
    Refuse(String),
}

/// Decides `/preset <args>` for an agent using `current`; `blank` = no turn has run yet.
pub fn preset_command(
    roster: &PresetRoster,
    current: &str,
    args: &str,
    blank: bool,
) -> PresetAction {
    let wanted = args.trim();
    if wanted.is_empty() {
        let lines: Vec<String> = roster
            .list()
            .iter()
            .map(|p| {
                let mark = if p.id == current { "*" } else { " " };
                match &p.description {
                    Some(d) => format!("{mark} {} — {d}", p.id),
                    None => format!("{mark} {}", p.id),
                }
            })
            .collect();
        return PresetAction::Show(format!(
            "Agent presets (current: {current}):\n{}",
            lines.join("\n")
        ));
    }
    if roster.get(wanted).is_none() {
        return PresetAction::Refuse(format!("Unknown preset: {wanted}"));
    }
    if wanted == current {
        return PresetAction::Show(format!("Already using preset {wanted}."));
    }
    if !blank {
        return PresetAction::Refuse(
            "The preset can only be switched before the session's first prompt.".to_owned(),
        );
    }
    PresetAction::Switch(wanted.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn ids_follow_the_pattern() {
        for good in ["standard", "a", "0x", "my-preset"] {
            assert!(valid_id(good), "{good}");
        }
        for bad in ["", "-a", "A", "my_preset", "a.b", "é"] {
            assert!(!valid_id(bad), "{bad}");
        }
    }

    #[test]
    fn folders_override_builtins_and_earlier_roots_win() {
        let dir = tempfile::tempdir().unwrap();
        let write = |root: &str, id: &str, text: &str| {
            let path = dir.path().join(root).join(id);
            std::fs::create_dir_all(&path).unwrap();
            std::fs::write(path.join(PRESET_FILE), text).unwrap();
        };
        write(
            "one",
            "minimal",
            "name = \"Mine\"\n[persona]\ntext = \"first\"\ncomplete = true\n",
        );
        write("two", "minimal", "name = \"Later\"\n");
        write(
            "two",
            "review",
            "description = \"Reviews\"\n[tools]\ndeny = [\"bash\"]\nmode = \"native\"\n",
        );
        write("two", "Bad_Id", "name = \"x\"\n");
        write("two", "broken", "persona = 3\n");
        write("two", "overlay", "[plugins.compaction]\nenabled = false\n");
        write("two", "coded", "[tools]\ndeny = [\"run_code\"]\n");
        let home = dir.path().join("home");
        write("home/.agent-presets", "mine", "name = \"User\"\n");
        let config = PresetsConfig {
            default: "standard".into(),
            roots: vec![
                PresetRoot {
                    path: dir.path().join("one"),
                    trust: false,
                },
                PresetRoot {
                    path: dir.path().join("two"),
                    trust: true,
                },
            ],
            include_user_root: true,
        };
        let roster = PresetRoster::discover(&config, &home).unwrap();
        let ids: Vec<&str> = roster.list().iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids, ["code", "mine", "minimal", "review", "standard"]);
        let minimal = roster.get("minimal").unwrap();
        assert_eq!(minimal.title(), "Mine");
        assert_eq!(minimal.persona.as_ref().unwrap().text, "first");
        assert!(matches!(
            minimal.origin,
            PresetOrigin::Folder { trusted: false, .. }
        ));
        let review = roster.get("review").unwrap();
        assert_eq!(
            review.tools,
            PresetTools {
                allow: None,
                deny: Some(vec!["bash".into()]),
                mode: Some(PresentationMode::Native),
            }
        );
        // A key a preset cannot apply is refused, not ignored: the folder is skipped.
        assert!(roster.get("overlay").is_none());
        assert!(roster.get("coded").is_none());
        assert!(matches!(
            roster.get("mine").unwrap().origin,
            PresetOrigin::Folder { trusted: true, .. }
        ));
        assert_eq!(roster.resolve(None).unwrap().id, "standard");
        assert!(roster.resolve(Some("nope")).is_err());
        let bad = PresetsConfig {
            default: "nope".into(),
            ..config
        };
        assert!(
            PresetRoster::discover(&bad, &home)
                .unwrap_err()
                .0
                .contains("default preset \"nope\"")
        );
    }

    #[test]
    fn the_builtins_change_nothing_by_default_and_minimal_is_complete() {
        let builtins = builtin_presets();
        let standard = builtins.iter().find(|p| p.id == STANDARD).unwrap();
        assert!(standard.persona.is_none() && standard.tools.is_empty());
        let minimal = builtins.iter().find(|p| p.id == "minimal").unwrap();
        assert!(minimal.persona.as_ref().unwrap().complete);
        let code = builtins.iter().find(|p| p.id == "code").unwrap();
        assert_eq!(code.tools.mode, Some(PresentationMode::Code));
        assert_eq!(PresetsConfig::default().default, STANDARD);
    }

    #[test]
    fn the_command_lists_and_switches_only_blank_agents() {
        let roster = PresetRoster::discover(
            &PresetsConfig {
                default: "standard".into(),
                roots: vec![],
                include_user_root: false,
            },
            Path::new("/nonexistent"),
        )
        .unwrap();
        let PresetAction::Show(list) = preset_command(&roster, "standard", "", true) else {
            panic!("a listing expected")
        };
        assert!(list.starts_with("Agent presets (current: standard):\n"));
        assert!(list.contains("* standard — "));
        assert_eq!(
            preset_command(&roster, "standard", " code ", true),
            PresetAction::Switch("code".into())
        );
        assert!(matches!(
            preset_command(&roster, "standard", "code", false),
            PresetAction::Refuse(_)
        ));
        assert_eq!(
            preset_command(&roster, "standard", "zzz", true),
            PresetAction::Refuse("Unknown preset: zzz".into())
        );
        assert_eq!(
            serde_json::to_value(PresetSelected {
                preset: "code".into()
            })
            .unwrap(),
            serde_json::json!({"preset": "code"})
        );
    }
}
