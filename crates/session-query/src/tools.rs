//! The five model tools (`tool-session-query`): input checks, workspace authorization, fixed
//! model-safe error texts, and the exact result layouts (context-spec §11.3).

use std::collections::HashSet;
use std::sync::Arc;

use dsh_protocol::ContentBlock;
use dsh_tools::DefineError;
use dsh_tools::Tool;
use dsh_tools::ToolDefinition;
use dsh_tools::ToolError;
use dsh_tools::ToolRun;
use serde::Deserialize;
use serde_json::Value;
use serde_json::json;

use crate::model::SurfaceClass;
use crate::model::TimestampError;
use crate::model::iso;
use crate::model::parse_timestamp;
use crate::model::searchable_text;
use crate::service::EventFilters;
use crate::service::QueryError;
use crate::service::SessionQuery;
use crate::service::SessionRecord;

/// `tool:session-query`, order 113 (exact).
pub const SECTION: (&str, u32) = ("tool:session-query", 113);
pub const SECTION_TEXT: &str = "Earlier work in this workspace can be recalled: session_search looks across past sessions, session_event_search looks inside one session. Results cover this workspace only and come in one page, without cursors. From a promising hit, session_trace shows a session's family, session_event_trace how an event relates to others, and session_event_read the event in full.";

const CAP_LINE: &str =
    "Result cap reached. Narrow the query or add filters to find additional matches.";

/// `tool-session-query` settings.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolsConfig {
    pub max_search_results: usize,
    pub search_timeout_ms: u64,
}

impl Default for ToolsConfig {
    fn default() -> Self {
        Self {
            max_search_results: 100,
            search_timeout_ms: 30_000,
        }
    }
}

fn tool_error(code: &str, message: &str) -> ToolError {
    ToolError::coded("SessionQueryToolError", code, message)
}

/// Service errors as fixed model-safe texts.
fn sanitize(error: QueryError) -> ToolError {
    match error.code {
        "SESSION_QUERY_SEARCH_DISABLED" => {
            tool_error(error.code, "session search is disabled in this deployment")
        }
        "SESSION_QUERY_SESSION_NOT_FOUND" => tool_error(error.code, "session was not found"),
        "SESSION_QUERY_EVENT_NOT_FOUND" => tool_error(error.code, "session event was not found"),
        "SESSION_QUERY_STALE_CURSOR" => tool_error(
            error.code,
            "session history changed while paging; retry the complete search call",
        ),
        "SESSION_QUERY_INVALID_QUERY"
        | "SESSION_QUERY_INVALID_FILTER"
        | "SESSION_QUERY_INVALID_WINDOW" => tool_error(error.code, &error.message),
        _ => tool_error(
            "SESSION_QUERY_TOOL_FAILED",
            "session query operation failed",
        ),
    }
}

fn invalid_filter(message: impl Into<String>) -> ToolError {
    tool_error("SESSION_QUERY_INVALID_FILTER", &message.into())
}

/// The calling session.
struct Caller {
    id: String,
    cwd: Option<String>,
}

/// The five tools over one service.
#[derive(Clone)]
pub struct SessionQueryTools {
    pub service: Arc<SessionQuery>,
    pub config: ToolsConfig,
}

fn strings(args: &Value, name: &str) -> Result<Option<Vec<String>>, ToolError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => {
            if items.is_empty() {
                return Err(invalid_filter(format!(
                    "{name} must contain at least one value when supplied"
                )));
            }
            Ok(Some(
                items
                    .iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect(),
            ))
        }
        Some(_) => Err(invalid_filter(format!(
            "{name} must be an array of strings"
        ))),
    }
}

fn bound(args: &Value, name: &str, which: &str) -> Result<Option<u64>, ToolError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => {
            let valid = value
                .as_f64()
                .filter(|n| n.fract() == 0.0 && *n >= 0.0 && *n <= 9_007_199_254_740_991.0);
            match valid {
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                Some(n) => Ok(Some(n as u64)),
                None => Err(invalid_filter(format!(
                    "sequence {which} bound must be a non-negative safe integer"
                ))),
            }
        }
    }
}

fn seq_range(args: &Value, from: &str, to: &str) -> Result<(Option<u64>, Option<u64>), ToolError> {
    let (lo, hi) = (bound(args, from, "lower")?, bound(args, to, "upper")?);
    if let (Some(lo), Some(hi)) = (lo, hi)
        && lo > hi
    {
        return Err(invalid_filter(
            "session sequence range from must be less than or equal to to",
        ));
    }
    Ok((lo, hi))
}

fn timestamp(args: &Value, name: &str) -> Result<Option<i64>, ToolError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => {
            let text = value.as_str().unwrap_or("");
            parse_timestamp(text).map(Some).map_err(|error| match error {
                TimestampError::Format => invalid_filter(format!(
                    "session {name} range must be an ISO 8601 timestamp with Z or a numeric offset"
                )),
                TimestampError::Invalid => invalid_filter(format!(
                    "session {name} range must be a valid ISO 8601 timestamp"
                )),
            })
        }
    }
}

fn time_range(args: &Value, prefix: &str) -> Result<(Option<i64>, Option<i64>), ToolError> {
    let from = timestamp(args, &format!("{prefix}_from"))?;
    let to = timestamp(args, &format!("{prefix}_to"))?;
    if let (Some(f), Some(t)) = (from, to)
        && f > t
    {
        return Err(invalid_filter(format!(
            "session {prefix} range from must be less than or equal to to"
        )));
    }
    Ok((from, to))
}

fn surfaces(args: &Value, name: &str) -> Result<Option<Vec<SurfaceClass>>, ToolError> {
    strings(args, name)?
        .map(|items| {
            items
                .iter()
                .map(|s| {
                    SurfaceClass::parse(s).ok_or_else(|| {
                        invalid_filter(format!("{name} must name current, shadowed or log-only"))
                    })
                })
                .collect()
        })
        .transpose()
}

fn query(args: &Value) -> Result<String, ToolError> {
    crate::service::normalize_query(args.get("query").and_then(Value::as_str).unwrap_or(""))
        .map_err(sanitize)
}

fn text_result(text: String) -> Value {
    json!({ "text": text })
}

fn surface_enum() -> Value {
    json!({"type": "array", "items": {"type": "string", "enum": ["current", "shadowed", "log-only"]}})
}

fn string_array() -> Value {
    json!({"type": "array", "items": {"type": "string"}})
}

impl SessionQueryTools {
    pub fn definitions(&self) -> Result<Vec<ToolDefinition>, DefineError> {
        Ok(vec![
            self.search_tool()?,
            self.event_search_tool()?,
            self.trace_tool()?,
            self.event_trace_tool()?,
            self.event_read_tool()?,
        ])
    }

    fn caller(&self, run: &ToolRun) -> Result<Caller, ToolError> {
        let agent = run.agent().ok_or_else(|| {
            tool_error(
                "SESSION_QUERY_TOOL_MISSING_AGENT",
                "session query tools require an agent-bound caller",
            )
        })?;
        let id = agent.id().to_owned();
        let cwd = self.service.record(&id).ok().and_then(|r| r.cwd);
        Ok(Caller { id, cwd })
    }

    fn authorized(caller: &Caller, target: &SessionRecord) -> bool {
        target.id == caller.id
            || (caller.cwd.is_some() && target.cwd.as_deref() == caller.cwd.as_deref())
    }

    /// The target session (the caller when `session_id` is omitted), authorized.
    fn target(&self, caller: &Caller, args: &Value) -> Result<SessionRecord, ToolError> {
        let id = args
            .get("session_id")
            .and_then(Value::as_str)
            .unwrap_or(&caller.id);
        let record = self.service.record(id).map_err(sanitize)?;
        if !Self::authorized(caller, &record) {
            return Err(tool_error(
                "SESSION_QUERY_TOOL_UNAUTHORIZED",
                "session target is outside the caller workspace",
            ));
        }
        Ok(record)
    }

    fn title(&self, id: &str) -> String {
        match self.service.read_session(id) {
            Ok(data) => data.title(),
            Err(error) => format!("untitled (title unavailable: {})", error.code),
        }
    }

    fn search_tool(&self) -> Result<ToolDefinition, DefineError> {
        let tools = self.clone();
        Tool::builder("session_search")
            .description("Search earlier sessions of this workspace for a literal phrase; returns the strongest matching event of each session, best first.")
            .validated_parameters(json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "A literal phrase (token match, case-insensitive)."},
                    "session_ids": string_array(),
                    "created_at_from": {"type": "string"},
                    "created_at_to": {"type": "string"},
                    "parent_session_ids": string_array(),
                    "include_root_sessions": {"type": "boolean"},
                    "availability": {"type": "array", "items": {"type": "string", "enum": ["live", "persisted"]}},
                    "event_seq_from": {"type": "integer"},
                    "event_seq_to": {"type": "integer"},
                    "event_time_from": {"type": "string"},
                    "event_time_to": {"type": "string"},
                    "event_types": string_array(),
                    "event_surfaces": surface_enum()
                },
                "required": ["query"]
            }))
            .raw_output(json!({"type": "object"}), render_text)
            .timeout_ms(self.config.search_timeout_ms)
            .run(move |args: Value, run: ToolRun| {
                let tools = tools.clone();
                async move { tools.session_search(&args, &run).map(text_result) }
            })
            .build()
    }

    fn session_search(&self, args: &Value, run: &ToolRun) -> Result<String, ToolError> {
        let caller = self.caller(run)?;
        let phrase = query(args)?;
        let Some(cwd) = caller.cwd.clone() else {
            return Err(tool_error(
                "SESSION_QUERY_TOOL_UNAUTHORIZED",
                "cross-session search is unavailable because the caller session has no workspace",
            ));
        };
        let ids = strings(args, "session_ids")?;
        let (created_from, created_to) = time_range(args, "created_at")?;
        let parents = strings(args, "parent_session_ids")?;
        let include_roots = args.get("include_root_sessions").and_then(Value::as_bool);
        let availability = strings(args, "availability")?;
        let (seq_from, seq_to) = seq_range(args, "event_seq_from", "event_seq_to")?;
        let (time_from, time_to) = time_range(args, "event_time")?;
        let filters = EventFilters {
            seq_from,
            seq_to,
            time_from,
            time_to,
            kinds: strings(args, "event_types")?,
            surfaces: surfaces(args, "event_surfaces")?,
        };
        let all = self.service.list_sessions();
        // Parent ids: de-duplicated, then authorized before anything is searched.
        let parents: Option<Vec<String>> = parents.map(|p| {
            let mut seen = HashSet::new();
            p.into_iter().filter(|id| seen.insert(id.clone())).collect()
        });
        if let Some(parents) = &parents {
            for parent in parents {
                match all.iter().find(|r| &r.id == parent) {
                    Some(record) if Self::authorized(&caller, record) => {}
                    Some(_) => {
                        return Err(tool_error(
                            "SESSION_QUERY_TOOL_UNAUTHORIZED",
                            "session target is outside the caller workspace",
                        ));
                    }
                    None => {
                        return Err(tool_error(
                            "SESSION_QUERY_SESSION_NOT_FOUND",
                            "session was not found",
                        ));
                    }
                }
            }
        }
        let candidates: Vec<SessionRecord> = all
            .iter()
            .filter(|r| r.id != caller.id && r.cwd.as_deref() == Some(cwd.as_str()))
            .filter(|r| ids.as_ref().is_none_or(|ids| ids.contains(&r.id)))
            .filter(|r| {
                let created = i64::try_from(r.created_at).unwrap_or(i64::MAX);
                created_from.is_none_or(|f| created >= f) && created_to.is_none_or(|t| created <= t)
            })
            .filter(|r| match (&parents, include_roots) {
                (None, None | Some(false)) => true,
                (None, Some(true)) => r.parent.is_none(),
                (Some(parents), roots) => {
                    r.parent.as_ref().is_some_and(|p| parents.contains(p))
                        || (roots == Some(true) && r.parent.is_none())
                }
            })
            .filter(|r| {
                availability.as_ref().is_none_or(|a| {
                    (r.live && a.iter().any(|x| x == "live"))
                        || (r.persisted && a.iter().any(|x| x == "persisted"))
                })
            })
            .cloned()
            .collect();
        let hits = self
            .service
            .search(&phrase, &candidates, &filters)
            .map_err(sanitize)?;
        let mut best: Vec<&crate::service::EventHit> = Vec::new();
        for hit in &hits {
            if !best.iter().any(|b| b.session_id == hit.session_id) {
                best.push(hit);
            }
        }
        if best.is_empty() {
            return Ok("No prior session matches found.".to_owned());
        }
        let max = self.config.max_search_results;
        let capped = best.len() > max;
        best.truncate(max);
        let mut blocks = Vec::new();
        for (i, hit) in best.iter().enumerate() {
            let Some(record) = all.iter().find(|r| r.id == hit.session_id) else {
                continue;
            };
            let parent = match &record.parent {
                None => "root".to_owned(),
                Some(parent) => match all.iter().find(|r| &r.id == parent) {
                    Some(p) if Self::authorized(&caller, p) => parent.clone(),
                    Some(_) => "[outside workspace]".to_owned(),
                    None => parent.clone(),
                },
            };
            blocks.push(format!(
                "{}. Session {} — {}\n   Created: {}\n   Parent: {}\n   Availability: {}\n   Best match: seq {} | {} | {} | {}\n   Snippet: {}",
                i + 1,
                record.id,
                self.title(&record.id),
                iso(record.created_at),
                parent,
                record.availability(),
                hit.seq,
                hit.kind,
                hit.surface.as_str(),
                iso(hit.time),
                hit.snippet
            ));
        }
        let mut text = format!(
            "Session search results ({}):\n\n{}",
            blocks.len(),
            blocks.join("\n\n")
        );
        if capped {
            text.push_str("\n\n");
            text.push_str(CAP_LINE);
        }
        Ok(text)
    }

    fn event_search_tool(&self) -> Result<ToolDefinition, DefineError> {
        let tools = self.clone();
        Tool::builder("session_event_search")
            .description("Search the events of one session (this one when session_id is omitted; the current step excluded) for a literal phrase.")
            .validated_parameters(json!({
                "type": "object",
                "properties": {
                    "session_id": {"type": "string", "description": "Omit for the current session."},
                    "query": {"type": "string"},
                    "seq_from": {"type": "integer"},
                    "seq_to": {"type": "integer"},
                    "time_from": {"type": "string"},
                    "time_to": {"type": "string"},
                    "event_types": string_array(),
                    "surfaces": surface_enum()
                },
                "required": ["query"]
            }))
            .raw_output(json!({"type": "object"}), render_text)
            .timeout_ms(self.config.search_timeout_ms)
            .run(move |args: Value, run: ToolRun| {
                let tools = tools.clone();
                async move { tools.session_event_search(&args, &run).map(text_result) }
            })
            .build()
    }

    fn session_event_search(&self, args: &Value, run: &ToolRun) -> Result<String, ToolError> {
        let caller = self.caller(run)?;
        let phrase = query(args)?;
        let target = self.target(&caller, args)?;
        let (seq_from, mut seq_to) = seq_range(args, "seq_from", "seq_to")?;
        let (time_from, time_to) = time_range(args, "time")?;
        if target.id == caller.id {
            // The invoking step is not history yet.
            let data = self.service.read_session(&target.id).map_err(sanitize)?;
            let boundary = data
                .events
                .iter()
                .rev()
                .find(|e| e.kind == "step/start")
                .ok_or_else(|| {
                    tool_error(
                        "SESSION_QUERY_TOOL_NO_CURRENT_STEP",
                        "current-session search requires an active step boundary",
                    )
                })?;
            if boundary.seq == 0 {
                return Ok(format!(
                    "Session {} — {}\n\nNo prior event matches found.",
                    target.id,
                    data.title()
                ));
            }
            let cap = boundary.seq - 1;
            seq_to = Some(seq_to.map_or(cap, |t| t.min(cap)));
        }
        let filters = EventFilters {
            seq_from,
            seq_to,
            time_from,
            time_to,
            kinds: strings(args, "event_types")?,
            surfaces: surfaces(args, "surfaces")?,
        };
        let mut hits = self
            .service
            .search(&phrase, std::slice::from_ref(&target), &filters)
            .map_err(sanitize)?;
        let title = self.title(&target.id);
        if hits.is_empty() {
            return Ok(format!(
                "Session {} — {title}\n\nNo prior event matches found.",
                target.id
            ));
        }
        let max = self.config.max_search_results;
        let capped = hits.len() > max;
        hits.truncate(max);
        let mut lines = vec![
            format!("Session {} — {title}", target.id),
            format!("\nEvent search results ({}):", hits.len()),
        ];
        for (i, hit) in hits.iter().enumerate() {
            lines.push(format!(
                "{}. seq {} | {} | {} | {}",
                i + 1,
                hit.seq,
                hit.kind,
                hit.surface.as_str(),
                iso(hit.time)
            ));
            lines.push(format!("   Snippet: {}", hit.snippet));
        }
        let mut text = lines.join("\n");
        if capped {
            text.push_str("\n\n");
            text.push_str(CAP_LINE);
        }
        Ok(text)
    }

    fn trace_tool(&self) -> Result<ToolDefinition, DefineError> {
        let tools = self.clone();
        Tool::builder("session_trace")
            .description("Read the lineage of a session (this one when session_id is omitted): its ancestors and its descendant tree.")
            .validated_parameters(json!({
                "type": "object",
                "properties": {"session_id": {"type": "string"}}
            }))
            .raw_output(json!({"type": "object"}), render_text)
            .concurrency_safe(|_| true)
            .run(move |args: Value, run: ToolRun| {
                let tools = tools.clone();
                async move { tools.session_trace(&args, &run).map(text_result) }
            })
            .build()
    }

    fn line_of(&self, record: &SessionRecord) -> String {
        format!(
            "- {} — {} | {} | {}",
            record.id,
            self.title(&record.id),
            iso(record.created_at),
            record.availability()
        )
    }

    fn session_trace(&self, args: &Value, run: &ToolRun) -> Result<String, ToolError> {
        let caller = self.caller(run)?;
        let target = self.target(&caller, args)?;
        let all = self.service.list_sessions();
        let mut lines = vec![
            format!("Session {} — {}", target.id, self.title(&target.id)),
            format!("Created: {}", iso(target.created_at)),
            format!("Availability: {}", target.availability()),
            String::new(),
            "Ancestors (nearest first):".to_owned(),
        ];
        if target.parent.is_none() {
            lines.push("- none (target is a root session)".to_owned());
        }
        let mut next = target.parent.clone();
        let mut seen = HashSet::new();
        while let Some(id) = next {
            if !seen.insert(id.clone()) {
                break;
            }
            match all.iter().find(|r| r.id == id) {
                Some(record) if Self::authorized(&caller, record) => {
                    lines.push(self.line_of(record));
                    next = record.parent.clone();
                }
                Some(_) => {
                    lines.push("- [outside workspace boundary]".to_owned());
                    break;
                }
                // The chain is incomplete here.
                None => break,
            }
        }
        lines.push(String::new());
        lines.push("Descendants:".to_owned());
        let mut tree = Vec::new();
        self.descendants(&caller, &all, &target.id, 0, &mut tree, &mut HashSet::new());
        if tree.is_empty() {
            lines.push("- none".to_owned());
        }
        lines.extend(tree);
        Ok(lines.join("\n"))
    }

    fn descendants(
        &self,
        caller: &Caller,
        all: &[SessionRecord],
        id: &str,
        depth: usize,
        out: &mut Vec<String>,
        seen: &mut HashSet<String>,
    ) {
        let mut children: Vec<&SessionRecord> = all
            .iter()
            .filter(|r| r.parent.as_deref() == Some(id))
            .collect();
        children.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
        let mut outside = false;
        for child in children {
            if !seen.insert(child.id.clone()) {
                continue;
            }
            if !Self::authorized(caller, child) {
                outside = true;
                continue;
            }
            out.push(format!("{}{}", "  ".repeat(depth), self.line_of(child)));
            self.descendants(caller, all, &child.id, depth + 1, out, seen);
        }
        if outside {
            out.push(format!(
                "{}- [outside workspace subtree]",
                "  ".repeat(depth)
            ));
        }
    }

    fn event_trace_tool(&self) -> Result<ToolDefinition, DefineError> {
        let tools = self.clone();
        Tool::builder("session_event_trace")
            .description("Read how one event relates to others: what replaced it, what it replaced, what it cites and what cites it.")
            .validated_parameters(json!({
                "type": "object",
                "properties": {"session_id": {"type": "string"}, "seq": {"type": "integer"}},
                "required": ["seq"]
            }))
            .raw_output(json!({"type": "object"}), render_text)
            .concurrency_safe(|_| true)
            .run(move |args: Value, run: ToolRun| {
                let tools = tools.clone();
                async move { tools.session_event_trace(&args, &run).map(text_result) }
            })
            .build()
    }

    fn session_event_trace(&self, args: &Value, run: &ToolRun) -> Result<String, ToolError> {
        let caller = self.caller(run)?;
        let target = self.target(&caller, args)?;
        let seq = seq_arg(args)?;
        let crate::service::EventWindow {
            data,
            target: event,
            ..
        } = self
            .service
            .read_event(&target.id, seq, 0, 0)
            .map_err(sanitize)?;
        let list = |seqs: Vec<u64>| {
            if seqs.is_empty() {
                "none".to_owned()
            } else {
                seqs.iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        };
        let analysis = &data.analysis;
        Ok([
            format!("Session {} — {}", target.id, data.title()),
            format!(
                "Target: seq {} | {} | {} | {}",
                event.seq,
                event.kind,
                analysis.class(event.seq).as_str(),
                iso(event.time)
            ),
            format!(
                "Replaced by: {}",
                analysis
                    .replaced_by
                    .get(&seq)
                    .map_or_else(|| "none".to_owned(), u64::to_string)
            ),
            format!(
                "Replacement chain: {}",
                list(analysis.replacement_chain(seq))
            ),
            format!(
                "Events replaced by target: {}",
                list(analysis.replaced.get(&seq).cloned().unwrap_or_default())
            ),
            format!(
                "Events cited directly as sources: {}",
                list(event.source_event_seqs().unwrap_or_default().to_vec())
            ),
            format!(
                "Direct derived events: {}",
                list(analysis.derived.get(&seq).cloned().unwrap_or_default())
            ),
        ]
        .join("\n"))
    }

    fn event_read_tool(&self) -> Result<ToolDefinition, DefineError> {
        let tools = self.clone();
        Tool::builder("session_event_read")
            .description("Read one complete event of a session, with short summaries of its neighbours.")
            .validated_parameters(json!({
                "type": "object",
                "properties": {
                    "session_id": {"type": "string"},
                    "seq": {"type": "integer"},
                    "before": {"type": "integer", "description": "Neighbouring events to summarise before the target."},
                    "after": {"type": "integer", "description": "Neighbouring events to summarise after the target."}
                },
                "required": ["seq"]
            }))
            .raw_output(json!({"type": "object"}), render_text)
            .concurrency_safe(|_| true)
            .run(move |args: Value, run: ToolRun| {
                let tools = tools.clone();
                async move { tools.session_event_read(&args, &run).map(text_result) }
            })
            .build()
    }

    fn session_event_read(&self, args: &Value, run: &ToolRun) -> Result<String, ToolError> {
        let caller = self.caller(run)?;
        let target = self.target(&caller, args)?;
        let seq = seq_arg(args)?;
        let window = |name: &str| -> Result<u64, ToolError> {
            match args.get(name) {
                None | Some(Value::Null) => Ok(0),
                Some(v) => v.as_u64().ok_or_else(|| {
                    tool_error(
                        "SESSION_QUERY_INVALID_WINDOW",
                        &format!("{name} must be a non-negative integer"),
                    )
                }),
            }
        };
        let (before, after) = (window("before")?, window("after")?);
        let crate::service::EventWindow {
            data,
            target: event,
            before: earlier,
            after: later,
        } = self
            .service
            .read_event(&target.id, seq, before, after)
            .map_err(sanitize)?;
        let pretty =
            serde_json::to_string_pretty(&*event).map_err(|e| ToolError::new(e.to_string()))?;
        let mut text = format!(
            "Session {} — {}\nTarget event seq {}:\n```json\n{pretty}\n```",
            target.id,
            data.title(),
            event.seq
        );
        let summarize = |events: &[Arc<dsh_session::Event>]| {
            events
                .iter()
                .map(|e| {
                    let head = format!("- seq {} | {} | {}", e.seq, e.kind, iso(e.time));
                    match searchable_text(e) {
                        Some(body) => format!("{head}\n  {}", body.replace('\n', "\n  ")),
                        None => format!("{head} | (no semantic text)"),
                    }
                })
                .collect::<Vec<_>>()
                .join("\n")
        };
        if !earlier.is_empty() {
            text.push_str(&format!("\n\nBefore:\n{}", summarize(&earlier)));
        }
        if !later.is_empty() {
            text.push_str(&format!("\n\nAfter:\n{}", summarize(&later)));
        }
        Ok(text)
    }
}

fn seq_arg(args: &Value) -> Result<u64, ToolError> {
    args.get("seq")
        .and_then(Value::as_u64)
        .ok_or_else(|| invalid_filter("seq must be a non-negative safe integer"))
}

fn render_text(_args: &Value, value: &Value) -> Result<Vec<ContentBlock>, ToolError> {
    Ok(vec![ContentBlock::text(
        value.get("text").and_then(Value::as_str).unwrap_or(""),
    )])
}
