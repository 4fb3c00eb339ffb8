use dsh_tool_shell::bash::bash_description;
use dsh_tool_shell::bash::bash_parameters;
use dsh_tool_shell::job_tools;
use dsh_tool_shell::texts;
use pretty_assertions::assert_eq;
use serde_json::Value;

use super::support::shape_string;

fn fixture() -> Value {
    serde_json::from_str(include_str!("../fixtures/upstream-tool-schemas.json")).unwrap()
}

/// Every string under a `description` key, tool-level and per-parameter.
fn descriptions(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                match v {
                    Value::String(text) if key == "description" => out.push(text.clone()),
                    other => descriptions(other, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| descriptions(v, out)),
        _ => {}
    }
}

#[test]
fn bash_parameter_shapes_match_upstream() {
    let f = fixture();
    assert_eq!(
        shape_string(&bash_parameters(true, true)),
        shape_string(&f["bash_confining"]["parameters"])
    );
    assert_eq!(
        shape_string(&bash_parameters(true, false)),
        shape_string(&f["bash_plain"]["parameters"])
    );
    let no_bg = bash_parameters(false, false);
    let props = no_bg["properties"].as_object().unwrap();
    assert!(!props.contains_key("run_in_background"));
    assert_eq!(
        props.keys().collect::<Vec<_>>(),
        ["command", "description", "timeoutMs", "workdir"]
    );
}

#[test]
fn bash_description_states_the_facts_the_model_needs() {
    let plain = bash_description(true, false);
    for fact in [
        "bash -c",
        "`workdir`",
        "`cd`",
        "`[exit code: N]`",
        "`$DSH_*`",
        "`[sandbox: file access denied under <mode> mode]`",
        "tail",
        "`run_in_background: true`",
        "`job_output`",
        "`job_kill`",
    ] {
        assert!(plain.contains(fact), "plain description lacks {fact:?}");
    }
    assert!(!plain.contains("sandbox_permissions"));
    assert!(!plain.contains("justification"));

    let confining = bash_description(true, true);
    assert!(confining.starts_with(&plain));
    let escalation = &confining[plain.len()..];
    for fact in [
        "`sandbox_permissions`",
        "`justification`",
        "narrowest",
        "approval prompts are disabled",
        "rejects",
    ] {
        assert!(
            escalation.contains(fact),
            "escalation paragraph lacks {fact:?}"
        );
    }

    let no_bg = bash_description(false, false);
    assert!(no_bg.ends_with(texts::BASH_BACKGROUND_DISABLED));
    assert!(!no_bg.contains("run_in_background"));
    assert!(no_bg.contains("timeout"));
}

#[test]
fn job_tool_shapes_match_upstream() {
    let f = fixture();
    for (name, params) in [
        ("job_output", job_tools::job_output_parameters()),
        ("job_list", job_tools::job_list_parameters()),
        ("job_kill", job_tools::job_kill_parameters()),
    ] {
        assert_eq!(
            shape_string(&params),
            shape_string(&f[name]["parameters"]),
            "{name}"
        );
    }
    assert!(texts::JOB_OUTPUT_DESCRIPTION.contains("`[status: ...]`"));
    assert!(texts::JOB_OUTPUT_DESCRIPTION.contains("`wait: true`"));
    assert!(texts::JOB_OUTPUT_PARAM_WAIT.contains("[status: running]"));
}

/// Descriptions are our own prose: none may be a verbatim copy of the recorded upstream text.
#[test]
fn no_description_is_copied_from_upstream() {
    let f = fixture();
    let mut upstream = Vec::new();
    descriptions(&f, &mut upstream);
    assert!(
        upstream.len() > 10,
        "fixture has {} descriptions",
        upstream.len()
    );
    let mut ours = vec![
        bash_description(true, true),
        bash_description(true, false),
        bash_description(false, false),
        texts::JOB_OUTPUT_DESCRIPTION.to_owned(),
        texts::JOB_LIST_DESCRIPTION.to_owned(),
        texts::JOB_KILL_DESCRIPTION.to_owned(),
        texts::BASH_PROMPT_SECTION.to_owned(),
        texts::JOBS_PROMPT_SECTION.to_owned(),
    ];
    for params in [
        bash_parameters(true, true),
        job_tools::job_output_parameters(),
        job_tools::job_kill_parameters(),
    ] {
        descriptions(&params, &mut ours);
    }
    for text in &ours {
        assert!(!upstream.contains(text), "copied from upstream: {text}");
    }
}
