//! `dsh-tool-web`: the `web_fetch` tool and its plugin ([`WebPlugin`], `[plugins.web]`).
//!
//! Owns: the tool's schema, result text, presentation meta and card; the default HTTP provider
//! (reqwest, built on first use, same-origin redirects, size caps); and an HTML → Markdown
//! converter (html5ever's WHATWG parser, bounded in depth, then our own linear Markdown pass)
//! that follows turndown's defaults plus GFM tables, because the converted text is model-facing.
//! Must not depend on: other capability crates, the host, a front-end.

mod address;
mod fetch;
mod html;
mod markdown;
mod plugin;

use dsh_kernel::Disposer;
use dsh_kernel::Scope;
use dsh_protocol::ContentBlock;
use dsh_tools::DefineError;
use dsh_tools::RegisterError;
use dsh_tools::Tool;
use dsh_tools::ToolCallKind;
use dsh_tools::ToolCallView;
use dsh_tools::ToolDefinition;
use dsh_tools::ToolError;
use dsh_tools::ToolRegistry;
use dsh_tools::ToolRun;
use serde_json::Value;
use serde_json::json;

pub use address::AddressPolicy;
pub use address::Refused;
pub use address::non_public_kind;
pub use fetch::FetchError;
pub use fetch::Fetched;
pub use fetch::Fetcher;
pub use fetch::MAX_BODY_BYTES;
pub use fetch::MAX_TEXT_CHARS;
pub use markdown::html_to_markdown;
pub use plugin::WebPlugin;
pub use plugin::WebSettings;

/// The tool's name, as the model calls it.
pub const NAME: &str = "web_fetch";
/// The whole model text is capped at this many characters (`fetchMaxOutputChars`).
pub const MAX_OUTPUT_CHARS: usize = 200_000;
/// Tool deadline (`fetchTimeoutMs`).
pub const TIMEOUT_MS: u64 = 30_000;
/// The prompt section's name (in the tool guidance slot).
pub const SECTION: &str = "tool:web_fetch";
/// Prompt section text (our wording).
pub const SECTION_TEXT: &str = "Use the web_fetch tool when you need the contents of one specific HTTP(S) address, such as a page found by a search. The page comes back as text (HTML is converted to Markdown). When you rely on what it says, cite the address as a markdown link.";

const DESCRIPTION: &str =
    "Fetch the content of a specific HTTP(S) URL and return it decoded to text.";
const FOOTER: &str =
    "\n\n(Content truncated. Fetch a more specific URL or section for the full text.)";

fn parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "url": {"type": "string", "description": "The absolute http:// or https:// URL to fetch."}
        },
        "required": ["url"]
    })
}

fn output_schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "url": {"type": "string"},
            "statusCode": {"type": "integer"},
            "truncated": {"type": "boolean"},
            "text": {"type": "string"}
        },
        "required": ["url", "statusCode", "truncated", "text"]
    })
}

/// `Fetched <url> (HTTP <status>)\n\n<body>`, plus the footer when truncated, capped at
/// [`MAX_OUTPUT_CHARS`] so that the footer always survives the cut.
pub fn render(fetched: &Fetched) -> String {
    let mut text = format!(
        "Fetched {} (HTTP {})\n\n{}",
        fetched.url, fetched.status, fetched.text
    );
    let mut truncated = fetched.truncated;
    let footer_chars = FOOTER.chars().count();
    if text.chars().count() + if truncated { footer_chars } else { 0 } > MAX_OUTPUT_CHARS {
        let keep = MAX_OUTPUT_CHARS.saturating_sub(footer_chars);
        if let Some((cut, _)) = text.char_indices().nth(keep) {
            text.truncate(cut);
        }
        truncated = true;
    }
    if truncated {
        text.push_str(FOOTER);
    }
    text
}

fn fetched_of(value: &Value) -> Fetched {
    Fetched {
        url: value["url"].as_str().unwrap_or("").to_owned(),
        status: value["statusCode"]
            .as_u64()
            .and_then(|s| u16::try_from(s).ok())
            .unwrap_or(0),
        text: value["text"].as_str().unwrap_or("").to_owned(),
        truncated: value["truncated"].as_bool().unwrap_or(false),
    }
}

/// The `web_fetch` definition over `fetcher`.
pub fn definition(fetcher: Fetcher) -> Result<ToolDefinition, DefineError> {
    Tool::builder(NAME)
        .description(DESCRIPTION)
        .validated_parameters(parameters())
        .raw_output(output_schema(), |_args, value| {
            Ok(vec![ContentBlock::text(render(&fetched_of(value)))])
        })
        .presentation_meta(|_args, value| {
            Ok(json!({
                "url": value["url"],
                "statusCode": value["statusCode"],
                "truncated": value["truncated"],
            }))
        })
        .present_call(|args: &Value| {
            Some(ToolCallView::Generic {
                title: args
                    .get("url")
                    .and_then(Value::as_str)
                    .unwrap_or(NAME)
                    .to_owned(),
                kind: Some(ToolCallKind::Fetch),
                raw_input: Some(args.clone()),
                content: None,
                locations: None,
            })
        })
        .concurrency_safe(|_| true)
        .timeout_ms(TIMEOUT_MS)
        .run(move |args: Value, run: ToolRun| {
            let fetcher = fetcher.clone();
            async move {
                let url = args.get("url").and_then(Value::as_str).unwrap_or("");
                let fetched = tokio::select! {
                    fetched = fetcher.fetch(url) => fetched,
                    () = run.signal().cancelled() => {
                        return Err(ToolError::new("web_fetch was cancelled"));
                    }
                }
                .map_err(|e| ToolError::new(e.to_string()))?;
                Ok(json!({
                    "url": fetched.url,
                    "statusCode": fetched.status,
                    "truncated": fetched.truncated,
                    "text": fetched.text,
                }))
            }
        })
        .build()
}

/// Why `web_fetch` could not be registered.
#[derive(Debug, thiserror::Error)]
pub enum WebRegisterError {
    #[error(transparent)]
    Define(#[from] DefineError),
    #[error(transparent)]
    Register(#[from] RegisterError),
}

/// Registers `web_fetch` in `scope`'s layer with the default HTTP provider (whose client is
/// built on the first call).
pub fn register(
    registry: &ToolRegistry,
    scope: &Scope,
    policy: AddressPolicy,
) -> Result<Disposer, WebRegisterError> {
    Ok(registry.register(scope, definition(Fetcher::with_policy(policy))?)?)
}

#[cfg(test)]
mod tests;
