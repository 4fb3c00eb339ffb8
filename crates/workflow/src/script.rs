//! The body checks that run before anything is published: no inline `meta`, and a parse of
//! the body as the engine will run it.

use oxc_allocator::Allocator;
use oxc_parser::Parser;
use oxc_span::SourceType;

use crate::error::WorkflowError;
use crate::error::code;

pub const INLINE_META: &str = "workflow meta rides the `meta` request field, not the script: remove the `export const meta = {...}` statement from the body";

/// Skips whitespace and comments at the start of `body`.
fn leading_code(body: &str) -> &str {
    let mut rest = body;
    loop {
        let trimmed = rest.trim_start();
        if let Some(after) = trimmed.strip_prefix("//") {
            rest = after.find('\n').map_or("", |i| &after[i..]);
        } else if let Some(after) = trimmed.strip_prefix("/*") {
            rest = after.find("*/").map_or("", |i| &after[i + 2..]);
        } else {
            return trimmed;
        }
    }
}

fn declares_meta(body: &str) -> bool {
    let code = leading_code(body);
    let Some(rest) = code.strip_prefix("export") else {
        return false;
    };
    let rest = rest.trim_start();
    let Some(rest) = rest.strip_prefix("const") else {
        return false;
    };
    let rest = rest.trim_start();
    rest.strip_prefix("meta").is_some_and(|after| {
        !after.starts_with(|c: char| c.is_alphanumeric() || c == '_' || c == '$')
    })
}

/// Rejects an inline `export const meta` and any body that does not parse as
/// `(async () => {\n<body>\n})()`.
pub fn check_script(body: &str) -> Result<(), WorkflowError> {
    if declares_meta(body) {
        return Err(WorkflowError::new(code::SCRIPT_PARSE, INLINE_META));
    }
    let source = format!("(async () => {{\n{body}\n}})()");
    let allocator = Allocator::default();
    let parsed = Parser::new(&allocator, &source, SourceType::cjs()).parse();
    if parsed.panicked || !parsed.diagnostics.is_empty() {
        let reasons: Vec<String> = parsed
            .diagnostics
            .iter()
            .map(|d| d.message.to_string())
            .collect();
        let reason = if reasons.is_empty() {
            "unparseable script".to_owned()
        } else {
            reasons.join("; ")
        };
        return Err(WorkflowError::new(
            code::SCRIPT_PARSE,
            format!("workflow script does not parse: {reason}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_meta_and_syntax_errors_are_rejected() {
        assert_eq!(
            check_script("// header\nexport const meta = {name: 'x'};\nreturn 1;")
                .unwrap_err()
                .message,
            INLINE_META
        );
        assert!(check_script("const metadata = 1; return metadata;").is_ok());
        assert!(check_script("const r = await agent('x'); return r;").is_ok());
        let error = check_script("return (;").unwrap_err();
        assert_eq!(error.code, "SCRIPT_PARSE");
        assert!(
            error
                .message
                .starts_with("workflow script does not parse: "),
            "{}",
            error.message
        );
    }
}
