//! TypeScript type-stripping (erasable syntax only) of a program wrapped as an async function.

use std::path::Path;
use std::path::PathBuf;

use oxc_allocator::Allocator;
use oxc_ast::AstKind;
use oxc_codegen::Codegen;
use oxc_codegen::CodegenOptions;
use oxc_parser::Parser;
use oxc_semantic::SemanticBuilder;
use oxc_span::SourceType;
use oxc_transformer::TransformOptions;
use oxc_transformer::Transformer;

/// The wrapper's name; reserved so no binding can collide with it.
pub(crate) const PROGRAM_FN: &str = "__dsh_main__";

/// The file name the engine reports in stack traces; [`LineMap::remap`] rewrites its positions
/// to the user's program.
pub(crate) const SCRIPT_NAME: &str = "program.js";
/// What a remapped position names: the model's own program.
const PROGRAM_NAME: &str = "program.ts";

/// The stripped script and the way back from its positions to the user's program.
#[derive(Debug, Clone, Default)]
pub(crate) struct Stripped {
    pub script: String,
    pub lines: LineMap,
}

/// Generated position → user position, from the code generator's source map. Generated lines
/// count from the script's first line; user lines from the program's first line.
#[derive(Debug, Clone, Default)]
pub(crate) struct LineMap {
    /// `(generated line, generated column, user line, user column)`, all 0-based, sorted.
    tokens: Vec<(u32, u32, u32, u32)>,
}

/// Lines the script has before the generated code (`"use strict";`).
const SCRIPT_PREAMBLE_LINES: u32 = 1;
/// Lines the wrapper puts before the user's program (the `async function` header).
const WRAPPER_LINES: u32 = 1;

impl LineMap {
    /// The user position (1-based line and column) of a 1-based position in the script.
    pub fn original(&self, line: u32, column: u32) -> Option<(u32, u32)> {
        let line = line.checked_sub(1 + SCRIPT_PREAMBLE_LINES)?;
        let column = column.saturating_sub(1);
        let at = self
            .tokens
            .partition_point(|&(l, c, _, _)| (l, c) <= (line, column));
        let &(_, _, user_line, user_column) = self.tokens.get(at.checked_sub(1)?)?;
        let user_line = user_line.checked_sub(WRAPPER_LINES)?;
        Some((user_line + 1, user_column + 1))
    }

    /// Rewrites every `program.js:LINE:COL` (or `program.js:LINE`) in `text` to the user's
    /// program (`program.ts:LINE:COL`); positions that map nowhere are left alone.
    pub fn remap(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(at) = rest.find(SCRIPT_NAME) {
            out.push_str(&rest[..at]);
            let after = &rest[at + SCRIPT_NAME.len()..];
            let (line, line_len) = number_after_colon(after);
            let (column, column_len) = number_after_colon(&after[line_len..]);
            match line.and_then(|l| self.original(l, column.unwrap_or(1))) {
                Some((user_line, user_column)) => {
                    out.push_str(PROGRAM_NAME);
                    out.push_str(&format!(":{user_line}"));
                    if column.is_some() {
                        out.push_str(&format!(":{user_column}"));
                    }
                    rest = &after[line_len + column_len..];
                }
                None => {
                    out.push_str(SCRIPT_NAME);
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        out
    }
}

/// `:123` at the start of `text`: the number and the length consumed.
fn number_after_colon(text: &str) -> (Option<u32>, usize) {
    let Some(digits) = text.strip_prefix(':') else {
        return (None, 0);
    };
    let len = digits.bytes().take_while(u8::is_ascii_digit).count();
    match digits[..len].parse() {
        Ok(n) if len > 0 => (Some(n), len + 1),
        _ => (None, 0),
    }
}

/// Why an `import` cannot work in a program (model-facing).
pub(crate) const IMPORT_REFUSED: &str = "SyntaxError: `import` is not available in Code Mode: the program is the body of one async function with no module loader. Call tools through the `tools` object (for example `await tools.read({...})`) instead of importing modules";

/// Wraps `program` as `async function __dsh_main__(<params>) { … }`, strips its types and
/// lowers TypeScript-only runtime syntax (`enum`, constructor parameter properties), and
/// returns plain JavaScript that evaluates (as a strict script) to that function.
/// `Err` carries the model-facing reason (`kind: exception`).
pub(crate) fn strip_program(program: &str, params: &[String]) -> Result<Stripped, StripError> {
    // The transformer asserts on inputs it does not expect; a program must never crash the host.
    std::panic::catch_unwind(|| strip(program, params))
        .unwrap_or(Err(StripError::TransformerPanicked))
}

/// Why a program was refused before it ran (the model sees it as a `SyntaxError` exception).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum StripError {
    #[error("SyntaxError: the program could not be type-stripped")]
    TransformerPanicked,
    #[error("SyntaxError: the program nests deeper than {MAX_NESTING} levels")]
    TooDeep,
    #[error("{IMPORT_REFUSED}")]
    Import,
    /// The parser's, checker's or transformer's own diagnostic.
    #[error("SyntaxError: {0}")]
    Syntax(String),
    #[error("SyntaxError: the program must be the body of one function")]
    NotOneFunction,
    #[error("SyntaxError: TypeScript {0}")]
    Unsupported(&'static str),
}

/// The parser and transformer recurse; a deeper program is refused before it can exhaust
/// the engine thread's stack (20 000 levels are known to fit in 64 MiB).
const MAX_NESTING: usize = 10_000;

/// Bracket nesting, counted naively (brackets inside strings count too; only an absurd
/// program is refused for that).
fn nesting(program: &str) -> usize {
    let mut depth: usize = 0;
    let mut max = 0;
    for byte in program.bytes() {
        match byte {
            b'(' | b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// Whether the program uses a static `import` declaration (parsed as a module on its own,
/// since inside the wrapper function it is only a confusing syntax error).
fn has_static_import(program: &str) -> bool {
    if !program.contains("import") {
        return false;
    }
    let allocator = Allocator::default();
    let parsed = Parser::new(&allocator, program, SourceType::ts()).parse();
    parsed
        .program
        .body
        .iter()
        .any(|statement| matches!(statement, oxc_ast::ast::Statement::ImportDeclaration(_)))
}

fn strip(program: &str, params: &[String]) -> Result<Stripped, StripError> {
    if nesting(program) > MAX_NESTING {
        return Err(StripError::TooDeep);
    }
    let source = format!(
        "async function {PROGRAM_FN}({}) {{\n{program}\n}}",
        params.join(", ")
    );
    let allocator = Allocator::default();
    let parsed = Parser::new(&allocator, &source, SourceType::ts()).parse();
    if (parsed.panicked || !parsed.diagnostics.is_empty()) && has_static_import(program) {
        return Err(StripError::Import);
    }
    if parsed.panicked || !parsed.diagnostics.is_empty() {
        let reasons: Vec<String> = parsed
            .diagnostics
            .iter()
            .map(|e| e.message.to_string())
            .collect();
        let reason = if reasons.is_empty() {
            "unparseable program".to_owned()
        } else {
            reasons.join("; ")
        };
        return Err(StripError::Syntax(reason));
    }
    let mut ast = parsed.program;
    if ast.body.len() != 1 {
        // A body that closes the wrapper early would run outside the sandboxed function.
        return Err(StripError::NotOneFunction);
    }
    let semantic = SemanticBuilder::new()
        .with_build_nodes(true)
        .with_check_syntax_error(true)
        .with_enum_eval(true)
        .build(&ast);
    let diagnostics = semantic.diagnostics;
    let semantic = semantic.semantic;
    for node in semantic.nodes().iter() {
        // `enum` and parameter properties are lowered by the transformer below; these have
        // no meaning inside one function body.
        let refused = match node.kind() {
            AstKind::ImportExpression(_) | AstKind::ImportDeclaration(_) => {
                return Err(StripError::Import);
            }
            AstKind::TSNamespaceDeclaration(n) if !n.declare => Some(
                "namespaces are not supported inside a Code Mode program (use a plain object instead)",
            ),
            AstKind::TSImportEqualsDeclaration(_) => {
                Some("`import =` declarations are not supported (there is no module loader)")
            }
            AstKind::TSExportAssignment(_) => {
                Some("`export =` assignments are not supported (the program is not a module)")
            }
            _ => None,
        };
        if let Some(what) = refused {
            return Err(StripError::Unsupported(what));
        }
    }
    // Our refusals name the cause better than the checker's generic messages, so they go first.
    if let Some(error) = diagnostics.first() {
        return Err(StripError::Syntax(error.message.to_string()));
    }
    let scoping = semantic.into_scoping();
    let options = TransformOptions::default();
    let stripped = Transformer::new(&allocator, Path::new("program.ts"), &options)
        .build_with_scoping(scoping, &mut ast);
    if let Some(error) = stripped.diagnostics.first() {
        return Err(StripError::Syntax(error.message.to_string()));
    }
    let generated = Codegen::new()
        .with_options(CodegenOptions {
            source_map_path: Some(PathBuf::from(PROGRAM_NAME)),
            ..CodegenOptions::default()
        })
        .build(&ast);
    let mut tokens: Vec<(u32, u32, u32, u32)> = generated
        .map
        .as_ref()
        .map(|map| {
            map.get_tokens()
                .map(|t| {
                    (
                        t.get_dst_line(),
                        t.get_dst_col(),
                        t.get_src_line(),
                        t.get_src_col(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    tokens.sort_unstable();
    Ok(Stripped {
        script: format!("\"use strict\";\n{}\n{PROGRAM_FN}", generated.code),
        lines: LineMap { tokens },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> Vec<String> {
        vec!["tools".into(), "console".into()]
    }

    #[test]
    fn annotations_and_interfaces_are_erased() {
        let js = strip_program(
            "interface A { x: number }\nconst a: A = { x: 1 } as A;\nreturn a.x satisfies number;",
            &params(),
        )
        .unwrap()
        .script;
        assert!(
            js.contains("async function __dsh_main__(tools, console)"),
            "{js}"
        );
        assert!(!js.contains("interface"), "{js}");
        assert!(!js.contains(": A"), "{js}");
    }

    #[test]
    fn enums_and_parameter_properties_are_lowered_namespaces_refused() {
        let js = strip_program("enum E { A, B = 5 }\nreturn E.B;", &params())
            .unwrap()
            .script;
        assert!(!js.contains("enum "), "{js}");
        let js = strip_program(
            "class C { constructor(private x: number, readonly y = 2) {} }\nreturn new C(1);",
            &params(),
        )
        .unwrap()
        .script;
        assert!(js.contains("this.x = x"), "{js}");
        let error = strip_program("namespace N { export const x = 1 }", &params())
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("SyntaxError: TypeScript namespaces are not supported"),
            "{error}"
        );
        assert!(strip_program("declare enum E { A }\nreturn 1", &params()).is_ok());
    }

    #[test]
    fn imports_are_refused_with_the_reason() {
        for program in [
            "import fs from 'fs';\nreturn 1;",
            "import { x } from './y';",
            "const m = await import('fs');",
        ] {
            let error = strip_program(program, &params()).unwrap_err().to_string();
            assert!(
                error.starts_with("SyntaxError: `import` is not available in Code Mode"),
                "{program}: {error}"
            );
        }
        // The word alone is fine.
        assert!(strip_program("const important = 1; return important;", &params()).is_ok());
    }

    #[test]
    fn generated_positions_map_back_to_the_users_lines() {
        let stripped = strip_program(
            "// a comment line\n\n\nconst a = 1;   const b = 2;\n\n  missing();\n",
            &params(),
        )
        .unwrap();
        let script_line = stripped
            .script
            .lines()
            .position(|l| l.contains("missing()"))
            .unwrap() as u32
            + 1;
        let column = stripped
            .script
            .lines()
            .nth(script_line as usize - 1)
            .unwrap()
            .find("missing")
            .unwrap() as u32
            + 1;
        assert_eq!(stripped.lines.original(script_line, column), Some((6, 3)));
        assert_eq!(
            stripped.lines.remap(&format!(
                "    at __dsh_main__ (program.js:{script_line}:{column})"
            )),
            "    at __dsh_main__ (program.ts:6:3)"
        );
        assert_eq!(
            stripped.lines.remap("no position program.js here"),
            "no position program.js here"
        );
    }

    #[test]
    fn refusal_texts_are_the_model_facing_syntax_errors() {
        assert_eq!(
            strip_program("}\nfoo();\nasync function x() {", &params()).unwrap_err(),
            StripError::NotOneFunction
        );
        assert_eq!(
            StripError::NotOneFunction.to_string(),
            "SyntaxError: the program must be the body of one function"
        );
        assert_eq!(
            strip_program("import fs from 'fs';\nreturn 1;", &params()).unwrap_err(),
            StripError::Import
        );
        assert_eq!(StripError::Import.to_string(), IMPORT_REFUSED);
        assert_eq!(
            StripError::TooDeep.to_string(),
            "SyntaxError: the program nests deeper than 10000 levels"
        );
    }

    #[test]
    fn absurd_nesting_is_refused_before_parsing() {
        let program = format!("return {}1{};", "[".repeat(50_000), "]".repeat(50_000));
        assert!(
            strip_program(&program, &params())
                .unwrap_err()
                .to_string()
                .contains("nests deeper")
        );
    }

    #[test]
    fn syntax_errors_and_wrapper_escapes_are_refused() {
        assert!(
            strip_program("const = ;", &params())
                .unwrap_err()
                .to_string()
                .starts_with("SyntaxError")
        );
        assert!(
            strip_program("}\nfoo();\nasync function x() {", &params())
                .unwrap_err()
                .to_string()
                .starts_with("SyntaxError")
        );
    }
}
