//! Items 69–72: what the model receives in each mode.

use std::sync::Arc;

use dsh_code::CODE_ONLY_RULE;
use dsh_code::CodeMode;
use dsh_code::CodeModeConfig;
use dsh_code::CodeModeError;
use dsh_code::CodeRunRequest;
use dsh_code::CodeRunResult;
use dsh_code::CodeRuntime;
use dsh_code::CodeRuntimeError;
use dsh_code::TS_CODE_PARAM;
use dsh_code::TS_DESCRIPTION;
use dsh_code::code_only_section;
use dsh_code::sdk_section;
use dsh_code::wire_schemas;
use dsh_kernel::Scope;
use dsh_tools::PresentationMode;
use dsh_tools::RegistryConfig;
use dsh_tools::ToolCallKind;
use dsh_tools::ToolCallView;
use dsh_tools::ToolRegistry;
use futures::future::BoxFuture;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::support::*;

fn names(env: &Env, scope: Option<&Scope>) -> Vec<String> {
    wire_schemas(&env.registry, scope)
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect()
}

#[test]
fn item_69_code_mode_lists_only_run_code_plus_the_rule_and_the_sdk() {
    let env = env(PresentationMode::Code);
    env.register(echo());
    assert_eq!(names(&env, Some(&env.scope)), vec!["run_code"]);
    assert_eq!(
        code_only_section(&env.registry, &env.scope).unwrap(),
        CODE_ONLY_RULE
    );
    let sdk = sdk_section(&env.registry, &env.scope).unwrap();
    assert!(sdk.contains("  /** Echo the text back */\n  echo: {\n    text: string;\n  } & Record<string, JsonValue>;"), "{sdk}");
    assert!(!sdk.contains("run_code:"));
    assert_eq!(
        sdk,
        sdk_section(&env.registry, &env.scope).unwrap(),
        "byte-identical"
    );
    let schema = wire_schemas(&env.registry, Some(&env.scope))
        .unwrap()
        .remove(0);
    assert_eq!(schema.description, TS_DESCRIPTION);
    assert_eq!(
        schema.parameters["properties"]["code"]["description"],
        json!(TS_CODE_PARAM)
    );
    assert_eq!(
        schema.parameters["required"],
        json!(["code", "description"])
    );
    assert!(Arc::ptr_eq(
        &env.registry.get("run_code", Some(&env.scope)).unwrap(),
        &env.registry.get("run_code", None).unwrap()
    ));
}

#[test]
fn item_69_both_mode_keeps_native_tools_and_an_empty_rule() {
    let env = env(PresentationMode::Both);
    env.register(echo());
    assert_eq!(names(&env, Some(&env.scope)), vec!["echo", "run_code"]);
    assert_eq!(code_only_section(&env.registry, &env.scope).unwrap(), "");
    assert!(
        sdk_section(&env.registry, &env.scope)
            .unwrap()
            .contains("echo: {")
    );
}

#[test]
fn item_69_native_mode_has_no_run_code_and_no_sections_and_needs_no_runtime() {
    let root = Scope::root();
    let registry = ToolRegistry::install(&root, RegistryConfig::default()).unwrap();
    CodeMode::install(&root, &registry, CodeModeConfig::default()).unwrap();
    registry.register(&root, echo()).unwrap();
    let (scope, _) = agent(&root, "a");
    let names: Vec<String> = registry
        .schemas(Some(&scope))
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, vec!["echo"]);
    assert_eq!(sdk_section(&registry, &scope).unwrap(), "");
    assert_eq!(code_only_section(&registry, &scope).unwrap(), "");
}

#[tokio::test]
async fn item_70_direct_calls_collapse_while_the_same_tool_runs_from_a_program() {
    let env = env(PresentationMode::Code);
    env.register(echo());
    let direct = env
        .registry
        .execute(
            dsh_tools::ToolCallInput::new("d1", "echo", json!({"text": "x"}), Default::default())
                .agent(env.agent.clone()),
        )
        .await;
    assert!(direct.is_error);
    assert_eq!(direct.error_code(), Some("UNKNOWN_TOOL"));
    assert_eq!(
        direct.error.as_ref().unwrap().message,
        "unknown tool \"echo\": only `run_code` is callable directly — call `echo` from inside a `run_code` program instead"
    );
    let nested = env.run("return await tools.echo({text: 'x'})").await;
    assert_eq!(text(&nested), "echo:x");
}

struct Ruby;
impl CodeRuntime for Ruby {
    fn language(&self) -> &str {
        "ruby"
    }
    fn isolation(&self) -> &str {
        "process"
    }
    fn run(
        &self,
        _: CodeRunRequest,
    ) -> BoxFuture<'static, Result<CodeRunResult, CodeRuntimeError>> {
        Box::pin(async { Ok(CodeRunResult::default()) })
    }
}

#[tokio::test]
async fn item_71_a_missing_or_unknown_runtime_fails_assembly_with_the_fixed_errors() {
    let root = Scope::root();
    let registry = ToolRegistry::install(&root, RegistryConfig::default()).unwrap();
    CodeMode::install(&root, &registry, CodeModeConfig::default()).unwrap();
    registry.register(&root, echo()).unwrap();
    let (scope, agent_handle) = agent(&root, "a");
    let _mode = registry.present_as(&scope, PresentationMode::Both).unwrap();
    let error = sdk_section(&registry, &scope).unwrap_err();
    assert_eq!(
        error.to_string(),
        "dsh-tools: mode \"both\" requires a code runtime — load a ctx.codeRuntime implementation (e.g. @deepseek-ai/dsh-code-runtime-worker-thread) or set tools mode to \"native\""
    );
    assert!(code_only_section(&registry, &scope).is_err());
    // Executing run_code without a runtime quotes the deployment default.
    let result = registry
        .execute(
            dsh_tools::ToolCallInput::new(
                "c",
                "run_code",
                json!({"code": "return 1", "description": "d"}),
                Default::default(),
            )
            .agent(agent_handle),
        )
        .await;
    assert!(result.is_error);
    assert!(
        text(&result).contains("mode \"native\" requires a code runtime"),
        "{}",
        text(&result)
    );
    let runtime: Arc<dyn CodeRuntime> = Arc::new(Ruby);
    root.provide::<dyn CodeRuntime>(runtime).unwrap();
    assert_eq!(
        sdk_section(&registry, &scope).unwrap_err(),
        CodeModeError::UnknownLanguage {
            language: "ruby".into()
        }
    );
    assert!(
        sdk_section(&registry, &scope)
            .unwrap_err()
            .to_string()
            .contains("no SDK renderer registered for runtime language \"ruby\" (known: \"typescript\", \"python\")")
    );
}

#[tokio::test]
async fn item_72_per_agent_presentation_is_scoped_and_restores_on_dispose() {
    let env = env(PresentationMode::Native);
    env.register(echo());
    let (other, _) = agent(&env.root, "other");
    let disposer = env
        .registry
        .present_as(&env.scope, PresentationMode::Code)
        .unwrap();
    assert_eq!(names(&env, Some(&env.scope)), vec!["run_code"]);
    assert_eq!(names(&env, Some(&other)), vec!["echo"]);
    assert_eq!(names(&env, None), vec!["echo"]);
    assert_eq!(
        code_only_section(&env.registry, &env.scope).unwrap(),
        CODE_ONLY_RULE
    );
    assert_eq!(sdk_section(&env.registry, &other).unwrap(), "");
    let child = env
        .scope
        .child(dsh_kernel::ScopeKind::Agent, "child")
        .unwrap();
    assert_eq!(
        names(&env, Some(&child)),
        vec!["run_code"],
        "inherited by descendants"
    );
    assert!(
        env.registry
            .present_as(&env.scope, PresentationMode::Both)
            .is_err()
    );
    assert!(
        env.registry
            .present_as(&env.root, PresentationMode::Code)
            .is_err()
    );
    disposer.dispose();
    assert_eq!(names(&env, Some(&env.scope)), vec!["echo"]);
    assert_eq!(sdk_section(&env.registry, &env.scope).unwrap(), "");
}

#[test]
fn zero_parallelism_is_refused() {
    let root = Scope::root();
    let registry = ToolRegistry::install(&root, RegistryConfig::default()).unwrap();
    assert_eq!(
        CodeMode::new(
            &root,
            &registry,
            CodeModeConfig {
                max_parallel_sub_calls: 0
            }
        )
        .unwrap_err(),
        CodeModeError::InvalidParallelism
    );
    assert_eq!(CodeModeConfig::default().max_parallel_sub_calls, 10);
}

#[test]
fn the_outer_card_is_generic_with_the_description_as_title() {
    let env = env(PresentationMode::Code);
    let run_code = env.registry.get("run_code", None).unwrap();
    assert_eq!(
        run_code.present_call(&json!({"code": "return 1", "description": "Count things"})),
        Some(ToolCallView::Generic {
            title: "Count things".into(),
            kind: Some(ToolCallKind::Execute),
            raw_input: Some(json!("return 1")),
            content: None,
            locations: None,
        })
    );
    assert!(!run_code.has_present_result());
    assert!(!run_code.has_concurrency_classifier());
}
