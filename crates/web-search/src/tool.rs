//! The `web_search` tool (`tool-web` search half): query checks, concurrent multi-query
//! search with round-robin merging, and the exact output text.

use std::sync::Arc;
use std::time::Duration;

use dsh_protocol::ContentBlock;
use dsh_tools::DefineError;
use dsh_tools::Tool;
use dsh_tools::ToolCallKind;
use dsh_tools::ToolCallView;
use dsh_tools::ToolDefinition;
use dsh_tools::ToolError;
use dsh_tools::ToolResultView;
use dsh_tools::ToolRun;
use dsh_tools::WebSource;
use dsh_tools::WebView;
use serde::Deserialize;
use serde_json::Value;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::service::RequestLog;
use crate::service::SearchRequest;
use crate::service::SearchResult;
use crate::service::Source;
use crate::service::WebError;
use crate::service::WebSearch;

/// Where a provider's side-request events go: the calling session's log.
pub trait SessionEvents: Send + Sync {
    fn record(&self, kind: &str, data: Value);
}

/// `tool-web` search settings.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SearchToolConfig {
    pub search: bool,
    /// Whether `web_fetch` is offered too (changes the prompt section).
    pub fetch: bool,
    pub search_max_results: usize,
    pub search_max_queries: usize,
    pub search_timeout_ms: u64,
}

impl Default for SearchToolConfig {
    fn default() -> Self {
        Self {
            search: true,
            fetch: true,
            search_max_results: 8,
            search_max_queries: 4,
            search_timeout_ms: 30_000,
        }
    }
}

/// Why `[plugins.web_search]` was refused at load (upstream's message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SearchConfigError {
    #[error("tool-web: {0} must be a positive integer")]
    NotPositive(&'static str),
}

impl SearchToolConfig {
    pub fn check(&self) -> Result<(), SearchConfigError> {
        for (name, value) in [
            ("searchMaxResults", self.search_max_results as u64),
            ("searchMaxQueries", self.search_max_queries as u64),
            ("searchTimeoutMs", self.search_timeout_ms),
        ] {
            if value == 0 {
                return Err(SearchConfigError::NotPositive(name));
            }
        }
        Ok(())
    }
}

/// `tool:web_search`, order 110.
pub const SECTION: (&str, u32) = ("tool:web_search", 110);

/// The section text (exact) for `queries` and whether `web_fetch` is offered.
pub fn section_text(max_queries: usize, fetch: bool) -> String {
    let head = format!(
        "When you need facts that may be newer than your training, call web_search. Put 1\u{2013}{max_queries} non-empty queries in its queries array (a single search is a one-element array); you get back the source URLs and, sometimes, a short answer."
    );
    if fetch {
        format!(
            "{head} To read a result in full, pass its URL to web_fetch. Cite the pages you rely on as markdown links."
        )
    } else {
        format!(
            "{head} Work from the snippets the sources come with, and cite the pages you rely on as markdown links."
        )
    }
}

/// `parseSearchArgs`: counts, blanks, then exact duplicates removed (first kept).
pub fn parse_queries(args: &Value, max: usize) -> Result<Vec<String>, ToolError> {
    let queries: Vec<&Value> = args
        .get("queries")
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    if queries.is_empty() {
        return Err(ToolError::new("queries must contain at least one query"));
    }
    if queries.len() > max {
        let noun = if max == 1 { "query" } else { "queries" };
        return Err(ToolError::new(format!(
            "queries must contain at most {max} {noun}"
        )));
    }
    let mut out: Vec<String> = Vec::new();
    for query in queries {
        let text = query.as_str().unwrap_or("");
        if text.trim().is_empty() {
            return Err(ToolError::new("each query must be a non-empty string"));
        }
        if !out.iter().any(|q| q == text) {
            out.push(text.to_owned());
        }
    }
    Ok(out)
}

/// Round-robin by rank, unseen URLs only, up to `max` sources.
pub fn merge(queries: &[String], results: &[SearchResult], max: usize) -> SearchResult {
    let mut sources: Vec<Source> = Vec::new();
    let mut truncated = results.iter().any(|r| r.truncated);
    let deepest = results.iter().map(|r| r.sources.len()).max().unwrap_or(0);
    'ranks: for rank in 0..deepest {
        for result in results {
            let Some(source) = result.sources.get(rank) else {
                continue;
            };
            if sources.iter().any(|s| s.url == source.url) {
                continue;
            }
            if sources.len() >= max {
                truncated = true;
                break 'ranks;
            }
            sources.push(source.clone());
        }
    }
    let blocks: Vec<String> = queries
        .iter()
        .zip(results)
        .filter_map(|(query, result)| {
            result
                .content
                .as_deref()
                .filter(|c| !c.is_empty())
                .map(|content| format!("### {query}\n\n{content}"))
        })
        .collect();
    SearchResult {
        content: (!blocks.is_empty()).then(|| blocks.join("\n\n")),
        sources,
        truncated,
    }
}

fn label(source: &Source) -> String {
    if let Some(title) = source.title.as_deref().filter(|t| !t.is_empty()) {
        return title.to_owned();
    }
    reqwest::Url::parse(&source.url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| source.url.clone())
}

/// `formatSearchOutput`.
pub fn format_output(result: &SearchResult) -> String {
    let mut parts: Vec<String> = Vec::new();
    let content = result.content.as_deref().filter(|c| !c.is_empty());
    if let Some(content) = content {
        parts.push(content.to_owned());
    }
    if !result.sources.is_empty() {
        let lines: Vec<String> = result
            .sources
            .iter()
            .map(|s| {
                let extra: Vec<String> = [
                    s.snippet.clone().filter(|x| !x.is_empty()),
                    s.published_at
                        .as_deref()
                        .filter(|x| !x.is_empty())
                        .map(|d| format!("({d})")),
                ]
                .into_iter()
                .flatten()
                .collect();
                let suffix = if extra.is_empty() {
                    String::new()
                } else {
                    format!(" \u{2014} {}", extra.join(" "))
                };
                format!("- [{}]({}){suffix}", label(s), s.url)
            })
            .collect();
        parts.push(format!("Sources:\n{}", lines.join("\n")));
    } else if content.is_none() {
        parts.push("No results found.".to_owned());
    }
    if result.truncated {
        parts.push(format!(
            "(Showing the first {} sources. Refine the query for more.)",
            result.sources.len()
        ));
    }
    parts.push("Cite the relevant URLs above as markdown links in your answer.".to_owned());
    parts.join("\n\n")
}

fn request_log(run: &ToolRun) -> Option<RequestLog> {
    if let Some(sink) = run.agent()?.scope().service::<dyn SessionEvents>() {
        return Some(Arc::new(move |kind: &str, data: Value| {
            sink.record(kind, data)
        }));
    }
    // Under the host: the calling session's durable-event sink (log-only events).
    let session = dsh_plugin::SessionContext::for_run(run, "web_search").ok()?;
    Some(Arc::new(move |kind: &str, data: Value| {
        if let Err(error) = session.record_raw(kind, data) {
            tracing::warn!(%error, kind, "cannot log a web search side request");
        }
    }))
}

/// Searches every query concurrently; the first failure cancels the rest and is the error.
pub async fn run_queries(
    web: &WebSearch,
    queries: &[String],
    max_results: usize,
    log: Option<RequestLog>,
    signal: &CancellationToken,
) -> Result<SearchResult, WebError> {
    if let [query] = queries {
        let request = SearchRequest {
            query: query.clone(),
            max_results,
        };
        return web.search(request, log, signal.child_token()).await;
    }
    let batch = signal.child_token();
    let searches = queries.iter().map(|query| {
        let request = SearchRequest {
            query: query.clone(),
            max_results,
        };
        let (log, batch) = (log.clone(), batch.clone());
        async move {
            let outcome = web.search(request, log, batch.child_token()).await;
            if outcome.is_err() {
                batch.cancel();
            }
            outcome
        }
    });
    let results = futures::future::try_join_all(searches).await?;
    Ok(merge(queries, &results, max_results))
}

fn sources_value(result: &SearchResult) -> Value {
    serde_json::to_value(&result.sources).unwrap_or(Value::Null)
}

/// The `web_search` definition.
pub fn definition(
    web: Arc<WebSearch>,
    config: SearchToolConfig,
) -> Result<ToolDefinition, DefineError> {
    let q = config.search_max_queries;
    Tool::builder("web_search")
        .description(format!(
            "Look things up on the web. queries (required) holds 1\u{2013}{q} search strings; the result lists source URLs and may include a short answer."
        ))
        .validated_parameters(json!({
            "type": "object",
            "properties": {
                "queries": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": format!("The searches to run, 1\u{2013}{q} of them; their results are merged.")
                }
            },
            "required": ["queries"]
        }))
        .raw_output(json!({"type": "object"}), |_args, value| {
            let result: SearchResult = serde_json::from_value(value.clone())
                .map_err(|e| ToolError::new(e.to_string()))?;
            Ok(vec![ContentBlock::text(format_output(&result))])
        })
        .presentation_meta(|_args, value| {
            let mut meta = json!({"sources": value.get("sources").cloned().unwrap_or(json!([])),
                                  "truncated": value.get("truncated").cloned().unwrap_or(json!(false))});
            if let Some(content) = value.get("content") {
                meta["answer"] = content.clone();
            }
            Ok(meta)
        })
        .timeout_ms(config.search_timeout_ms)
        .concurrency_safe(|_| true)
        .present_call(|args: &Value| {
            let title = args
                .get("queries")
                .and_then(Value::as_array)
                .map(|q| q.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", "))
                .unwrap_or_default();
            Some(
                ToolCallView::generic(title.clone())
                    .kind(ToolCallKind::Search)
                    .raw_input(json!(title)),
            )
        })
        .present_result(|args: &Value, view| {
            if view.is_error {
                return None;
            }
            let meta = view.meta.as_ref()?;
            let sources: Vec<WebSource> = serde_json::from_value(meta.get("sources")?.clone()).ok()?;
            let title = args
                .get("queries")
                .and_then(Value::as_array)
                .map(|q| q.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", "));
            Some(ToolResultView::Web(WebView::Search {
                title,
                sources,
                answer: meta.get("answer").and_then(Value::as_str).map(str::to_owned),
                truncated: meta.get("truncated").and_then(Value::as_bool).unwrap_or(false),
            }))
        })
        .run(move |args: Value, run: ToolRun| {
            let web = web.clone();
            let config = config.clone();
            async move {
                let queries = parse_queries(&args, config.search_max_queries)?;
                let log = request_log(&run);
                let timeout = Duration::from_millis(config.search_timeout_ms);
                let signal = run.signal().child_token();
                let result = tokio::select! {
                    result = run_queries(&web, &queries, config.search_max_results, log, &signal) => {
                        result.map_err(|e| ToolError::coded("WebError", e.code, e.message))?
                    }
                    () = tokio::time::sleep(timeout) => {
                        signal.cancel();
                        return Err(ToolError::coded(
                            "ToolTimeoutError",
                            "TOOL_TIMEOUT",
                            format!("tool call timed out after {}ms", config.search_timeout_ms),
                        ));
                    }
                };
                let mut value = json!({"sources": sources_value(&result), "truncated": result.truncated});
                if let Some(content) = &result.content {
                    value["content"] = json!(content);
                }
                Ok(value)
            }
        })
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(url: &str) -> Source {
        Source {
            url: url.to_owned(),
            title: None,
            snippet: None,
            published_at: None,
        }
    }

    fn result(urls: &[&str]) -> SearchResult {
        SearchResult {
            content: None,
            sources: urls.iter().map(|u| src(u)).collect(),
            truncated: false,
        }
    }

    #[test]
    fn query_checks() {
        let err = |v: Value, max| parse_queries(&v, max).unwrap_err().message;
        assert_eq!(
            err(json!({"queries": []}), 4),
            "queries must contain at least one query"
        );
        assert_eq!(
            err(json!({"queries": ["a","b","c","d","e"]}), 4),
            "queries must contain at most 4 queries"
        );
        assert_eq!(
            err(json!({"queries": ["a","b"]}), 1),
            "queries must contain at most 1 query"
        );
        assert_eq!(
            err(json!({"queries": ["a", " "]}), 4),
            "each query must be a non-empty string"
        );
        assert_eq!(
            parse_queries(&json!({"queries": ["a", "a", "A"]}), 4).unwrap(),
            vec!["a", "A"]
        );
    }

    #[test]
    fn merging_is_round_robin_and_capped() {
        let q = vec!["x".to_owned(), "y".to_owned()];
        let merged = merge(&q, &[result(&["A", "B"]), result(&["C", "A"])], 8);
        let urls: Vec<&str> = merged.sources.iter().map(|s| s.url.as_str()).collect();
        assert_eq!(urls, ["A", "C", "B"]);
        assert!(!merged.truncated);
        let capped = merge(&q, &[result(&["A", "B"]), result(&["C", "D"])], 2);
        let urls: Vec<&str> = capped.sources.iter().map(|s| s.url.as_str()).collect();
        assert_eq!(urls, ["A", "C"]);
        assert!(capped.truncated);
        assert!(
            format_output(&capped)
                .contains("(Showing the first 2 sources. Refine the query for more.)")
        );
        let mut a = result(&[]);
        a.content = Some("one".into());
        let mut b = result(&[]);
        b.content = Some("two".into());
        assert_eq!(
            merge(&q, &[a, b], 8).content.as_deref(),
            Some("### x\n\none\n\n### y\n\ntwo")
        );
    }

    #[test]
    fn output_format() {
        let mut r = result(&["https://example.com/a"]);
        r.sources[0].title = Some("Example".into());
        r.sources[0].snippet = Some("snippet text".into());
        r.sources[0].published_at = Some("2024-01-02".into());
        assert_eq!(
            format_output(&r),
            "Sources:\n- [Example](https://example.com/a) \u{2014} snippet text (2024-01-02)\n\nCite the relevant URLs above as markdown links in your answer."
        );
        let bare = result(&["https://docs.rs/x"]);
        assert!(format_output(&bare).contains("- [docs.rs](https://docs.rs/x)\n"));
        assert_eq!(
            format_output(&result(&[])),
            "No results found.\n\nCite the relevant URLs above as markdown links in your answer."
        );
    }
}
