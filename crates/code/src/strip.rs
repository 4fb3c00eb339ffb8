//! TypeScript type-stripping (erasable syntax only) of a program wrapped as an async function.

use std::path::Path;

use oxc_allocator::Allocator;
use oxc_ast::AstKind;
use oxc_codegen::Codegen;
use oxc_parser::Parser;
use oxc_semantic::SemanticBuilder;
use oxc_span::SourceType;
use oxc_transformer::TransformOptions;
use oxc_transformer::Transformer;

/// The wrapper's name; reserved so no binding can collide with it.
pub(crate) const PROGRAM_FN: &str = "__dsh_main__";

/// Wraps `program` as `async function __dsh_main__(<params>) { … }`, strips its types and
/// returns plain JavaScript that evaluates (as a strict script) to that function.
/// `Err` carries the model-facing reason (`kind: exception`).
pub(crate) fn strip_program(program: &str, params: &[String]) -> Result<String, String> {
    // The transformer asserts on inputs it does not expect; a program must never crash the host.
    std::panic::catch_unwind(|| strip(program, params))
        .unwrap_or_else(|_| Err("SyntaxError: the program could not be type-stripped".to_owned()))
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

fn strip(program: &str, params: &[String]) -> Result<String, String> {
    if nesting(program) > MAX_NESTING {
        return Err(format!(
            "SyntaxError: the program nests deeper than {MAX_NESTING} levels"
        ));
    }
    let source = format!(
        "async function {PROGRAM_FN}({}) {{\n{program}\n}}",
        params.join(", ")
    );
    let allocator = Allocator::default();
    let parsed = Parser::new(&allocator, &source, SourceType::ts()).parse();
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
        return Err(format!("SyntaxError: {reason}"));
    }
    let mut ast = parsed.program;
    if ast.body.len() != 1 {
        // A body that closes the wrapper early would run outside the sandboxed function.
        return Err("SyntaxError: the program must be the body of one function".to_owned());
    }
    let semantic = SemanticBuilder::new()
        .with_build_nodes(true)
        .with_check_syntax_error(true)
        .with_enum_eval(true)
        .build(&ast);
    if let Some(error) = semantic.diagnostics.first() {
        return Err(format!("SyntaxError: {}", error.message));
    }
    let semantic = semantic.semantic;
    for node in semantic.nodes().iter() {
        let refused = match node.kind() {
            AstKind::TSEnumDeclaration(e) if !e.declare => Some("enum declarations"),
            AstKind::TSNamespaceDeclaration(n) if !n.declare => Some("namespaces"),
            AstKind::TSImportEqualsDeclaration(_) => Some("`import =` declarations"),
            AstKind::TSExportAssignment(_) => Some("`export =` assignments"),
            AstKind::FormalParameter(p) if p.accessibility.is_some() || p.readonly => {
                Some("parameter properties")
            }
            _ => None,
        };
        if let Some(what) = refused {
            return Err(format!(
                "SyntaxError: TypeScript {what} are not erasable syntax; only type annotations can be stripped"
            ));
        }
    }
    let scoping = semantic.into_scoping();
    let options = TransformOptions::default();
    let stripped = Transformer::new(&allocator, Path::new("program.ts"), &options)
        .build_with_scoping(scoping, &mut ast);
    if let Some(error) = stripped.diagnostics.first() {
        return Err(format!("SyntaxError: {}", error.message));
    }
    let code = Codegen::new().build(&ast).code;
    Ok(format!("\"use strict\";\n{code}\n{PROGRAM_FN}"))
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
        .unwrap();
        assert!(
            js.contains("async function __dsh_main__(tools, console)"),
            "{js}"
        );
        assert!(!js.contains("interface"), "{js}");
        assert!(!js.contains(": A"), "{js}");
    }

    #[test]
    fn enums_namespaces_and_parameter_properties_are_refused() {
        for program in [
            "enum E { A }",
            "namespace N { export const x = 1 }",
            "class C { constructor(private x: number) {} }",
        ] {
            let error = strip_program(program, &params()).unwrap_err();
            assert!(error.starts_with("SyntaxError: "), "{program}: {error}");
        }
        assert!(strip_program("declare enum E { A }\nreturn 1", &params()).is_ok());
    }

    #[test]
    fn absurd_nesting_is_refused_before_parsing() {
        let program = format!("return {}1{};", "[".repeat(50_000), "]".repeat(50_000));
        assert!(
            strip_program(&program, &params())
                .unwrap_err()
                .contains("nests deeper")
        );
    }

    #[test]
    fn syntax_errors_and_wrapper_escapes_are_refused() {
        assert!(
            strip_program("const = ;", &params())
                .unwrap_err()
                .starts_with("SyntaxError")
        );
        assert!(
            strip_program("}\nfoo();\nasync function x() {", &params())
                .unwrap_err()
                .starts_with("SyntaxError")
        );
    }
}
