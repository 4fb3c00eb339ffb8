use super::*;
use crate::card::ToolCallKind;
use pretty_assertions::assert_eq;
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize, schemars::JsonSchema)]
struct ReadArgs {
    /// Absolute path
    path: String,
    limit: Option<u32>,
}

fn read_tool() -> ToolDefinition {
    Tool::builder("read")
        .description("Read a file.")
        .params::<ReadArgs>()
        .raw_output(json!({"type":"string"}), |_, v| {
            Ok(vec![ContentBlock::text(v.as_str().unwrap_or(""))])
        })
        .present_call(|a: &ReadArgs| {
            Some(ToolCallView::generic(format!("Read {}", a.path)).kind(ToolCallKind::Read))
        })
        .present_result(|a: &ReadArgs, r: &ResultView| {
            Some(ToolResultView::Generic {
                title: Some(format!("{} ({})", a.path, r.is_error)),
                content: None,
            })
        })
        .run(|args: ReadArgs, _run| async move {
            Ok::<_, ToolError>(format!("{}:{:?}", args.path, args.limit))
        })
        .build()
        .unwrap()
}

#[test]
fn typed_parameters_are_derived_and_validated() {
    let def = read_tool();
    assert!(def.validates_arguments());
    assert_eq!(def.parameters()["type"], json!("object"));
    assert_eq!(def.parameters()["required"], json!(["path"]));
    assert!(def.validate_arguments(&json!({"path": "a"})).is_empty());
    assert_eq!(
        def.validate_arguments(&json!({})),
        vec!["missing required property \"path\"".to_owned()]
    );
    assert_eq!(
        def.validate_arguments(&json!({"path": null})),
        vec!["\"path\" must be a string".to_owned()]
    );
}

#[test]
fn presenters_are_soft_validated() {
    let def = read_tool();
    assert_eq!(
        def.present_call(&json!({"path": "/a"})),
        Some(ToolCallView::generic("Read /a").kind(ToolCallKind::Read))
    );
    assert_eq!(def.present_call(&json!({"file": "/a"})), None);
    assert_eq!(def.present_call(&json!("not an object")), None);
    let view = ResultView {
        content: vec![],
        is_error: false,
        meta: None,
    };
    assert_eq!(
        def.present_result(&json!({"path": "/a"}), &view),
        Some(ToolResultView::Generic {
            title: Some("/a (false)".into()),
            content: None
        })
    );
    assert_eq!(def.present_result(&json!({"path": 1}), &view), None);
    assert_eq!(
        crate::card::call_card(Some(&def), "read", &json!({"path": 1})),
        ToolCallView::fallback("read", &json!({"path": 1}))
    );
}

#[test]
fn absent_methods_stay_absent_and_timeout_is_copied_only_when_declared() {
    let def = Tool::builder("bare")
        .raw_output(json!({}), |_, _| Ok(vec![]))
        .run(|_a: Value, _r| async { Ok::<_, ToolError>(Value::Null) })
        .build()
        .unwrap();
    assert!(!def.has_present_call() && !def.has_present_result() && !def.has_finalize_content());
    assert!(!def.has_concurrency_classifier() && !def.has_presentation_meta());
    assert_eq!(def.timeout_ms(), None);
    assert_eq!(def.present_call(&json!({})), None);
    assert!(!def.is_concurrency_safe(&json!({})));
    let missing_body = Tool::builder("nobody")
        .raw_output(json!({}), |_, _| Ok(vec![]))
        .build();
    assert_eq!(
        missing_body.unwrap_err().to_string(),
        "tool \"nobody\" must declare a body (.run)"
    );
}

#[test]
fn author_dsl_compiles_like_upstream() {
    let def = Tool::builder("read_file")
        .author_parameters(&json!({
            "path": {"type": "string", "required": true, "description": "Absolute path"},
            "offset": {"type": "number"}
        }))
        .author_output(&json!({"type": "json"}), |_, _| Ok(vec![]))
        .run(|_a: Value, _r| async { Ok::<_, ToolError>(Value::Null) })
        .build()
        .unwrap();
    assert_eq!(
        def.parameters(),
        &json!({"type":"object","properties":{"path":{"type":"string","description":"Absolute path"},"offset":{"type":"number"}},"required":["path"]})
    );
    assert_eq!(def.output_schema(), &json!({}));
}
