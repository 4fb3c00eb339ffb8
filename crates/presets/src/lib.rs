//! `dsh-presets`: named agent configurations and their personas (context-spec §12.4).
//!
//! Owns: the persona row (template, `complete`, `include_runtime_context`) and how it shapes an
//! agent's prompt; the preset roster (built-in presets, preset folders under configured roots
//! and `<dshHome>/.agent-presets`, ids, display metadata, the default); each preset's settings
//! overlay (which plugins and tool mode it composes); the durable `agent-preset/selected`
//! record of a switch; and the `/preset` command's texts.
//! Does not own: applying an overlay to a composition (the host does), the command registry.
//! Must not depend on: front-ends, the host.

use std::path::Path;
use std::path::PathBuf;

use dsh_agent::PromptConfig;
use dsh_session::data::EventData;
use serde::Deserialize;
use serde::Serialize;
use serde_json::Value;
use serde_json::json;

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

impl Persona {
    /// Shapes `prompt` for an agent of this persona.
    pub fn apply(&self, prompt: &mut PromptConfig) {
        prompt.persona = self.text.clone();
        prompt.persona_complete = self.complete;
        if self.complete {
            prompt.include_harness_identity = false;
        }
        prompt.include_runtime_context = self.include_runtime_context;
    }
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
    /// The configuration overlay (`{"plugins": {...}, "tools": {...}}`) the host applies to
    /// this preset's agents.
    pub settings: Value,
    pub origin: PresetOrigin,
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
    plugins: Option<toml::Table>,
    #[serde(default)]
    tools: Option<toml::Table>,
    #[serde(default)]
    model: Option<toml::Table>,
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
    let mut settings = serde_json::Map::new();
    for (key, table) in [
        ("plugins", file.plugins),
        ("tools", file.tools),
        ("model", file.model),
    ] {
        if let Some(table) = table {
            let value = serde_json::to_value(table)
                .map_err(|e| PresetError(format!("{}: {e}", path.display())))?;
            settings.insert(key.to_owned(), value);
        }
    }
    Ok(Preset {
        id,
        name: file.name,
        description: file.description,
        persona: file.persona,
        settings: Value::Object(settings),
        origin: PresetOrigin::Folder {
            path: dir.to_path_buf(),
            trusted,
        },
    })
}

/// The presets dsh ships.
pub fn builtin_presets() -> Vec<Preset> {
    let persona = |complete: bool, text: &str| Persona {
        text: text.to_owned(),
        complete,
        include_runtime_context: true,
    };
    vec![
        Preset {
            id: "standard".into(),
            name: Some("Standard".into()),
            description: Some(
                "Every tool offered on its own; workspace instructions and compaction on.".into(),
            ),
            persona: Some(persona(
                false,
                "You are a software engineering agent using the {{model}} model, working in {{cwd}}.",
            )),
            settings: json!({}),
            origin: PresetOrigin::Builtin,
        },
        Preset {
            id: "code".into(),
            name: Some("Code".into()),
            description: Some("Tools are called from programs through run_code.".into()),
            persona: Some(persona(
                false,
                "You are a software engineering agent using the {{model}} model, working in {{cwd}}. Prefer one program that does several steps over many single tool calls.",
            )),
            settings: json!({"tools": {"mode": "code"}}),
            origin: PresetOrigin::Builtin,
        },
        Preset {
            id: "minimal".into(),
            name: Some("Minimal".into()),
            description: Some("A bare prompt and no compaction.".into()),
            persona: Some(persona(
                true,
                "You are an assistant using the {{model}} model. Answer directly and use tools only when asked.",
            )),
            settings: json!({"plugins": {"compaction": {"enabled": false}}}),
            origin: PresetOrigin::Builtin,
        },
    ]
}

/// A preset root.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PresetRoot {
    pub path: PathBuf,
    #[serde(default)]
    pub trust: bool,
}

/// `agent-presets` settings.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PresetsConfig {
    pub default: String,
    #[serde(default)]
    pub roots: Vec<PresetRoot>,
    #[serde(default = "yes", alias = "includeUserRoot")]
    pub include_user_root: bool,
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
    fn personas_shape_the_prompt() {
        let mut prompt = PromptConfig::default();
        Persona {
            text: "T".into(),
            complete: true,
            include_runtime_context: false,
        }
        .apply(&mut prompt);
        assert!(prompt.persona_complete);
        assert!(!prompt.include_harness_identity);
        assert!(!prompt.include_runtime_context);
        assert_eq!(prompt.persona, "T");
    }

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
            "description = \"Reviews\"\n[plugins.compaction]\nenabled = false\n[tools]\nmode = \"native\"\n",
        );
        write("two", "Bad_Id", "name = \"x\"\n");
        write("two", "broken", "persona = 3\n");
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
            review.settings,
            json!({"plugins": {"compaction": {"enabled": false}}, "tools": {"mode": "native"}})
        );
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
    fn the_builtins_ship_a_complete_minimal_persona_without_compaction() {
        let minimal = builtin_presets()
            .into_iter()
            .find(|p| p.id == "minimal")
            .unwrap();
        assert!(minimal.persona.unwrap().complete);
        assert_eq!(minimal.settings["plugins"]["compaction"]["enabled"], false);
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
            json!({"preset": "code"})
        );
    }
}
