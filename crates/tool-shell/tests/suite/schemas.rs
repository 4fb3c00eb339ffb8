use dsh_tool_shell::bash::bash_description;
use dsh_tool_shell::bash::bash_parameters;
use dsh_tool_shell::job_tools;
use dsh_tool_shell::texts;
use pretty_assertions::assert_eq;
use serde_json::Value;

fn fixture() -> Value {
    serde_json::from_str(include_str!("../fixtures/upstream-tool-schemas.json")).unwrap()
}

#[test]
fn bash_schema_matches_upstream_byte_for_byte() {
    let f = fixture();
    let confining = &f["bash_confining"];
    assert_eq!(
        bash_description(true, true),
        confining["description"].as_str().unwrap()
    );
    assert_eq!(
        serde_json::to_string(&bash_parameters(true, true)).unwrap(),
        serde_json::to_string(&confining["parameters"]).unwrap()
    );
    let plain = &f["bash_plain"];
    assert_eq!(
        bash_description(true, false),
        plain["description"].as_str().unwrap()
    );
    assert_eq!(
        serde_json::to_string(&bash_parameters(true, false)).unwrap(),
        serde_json::to_string(&plain["parameters"]).unwrap()
    );
    let no_bg = bash_description(false, false);
    assert!(no_bg.ends_with(
        "Background execution is not available; long-running commands must finish within the timeout."
    ));
    assert!(
        !bash_parameters(false, false)["properties"]
            .as_object()
            .unwrap()
            .contains_key("run_in_background")
    );
}

#[test]
fn job_tool_schemas_match_upstream() {
    let f = fixture();
    for (name, description, params) in [
        (
            "job_output",
            texts::JOB_OUTPUT_DESCRIPTION,
            job_tools::job_output_parameters(),
        ),
        (
            "job_list",
            texts::JOB_LIST_DESCRIPTION,
            job_tools::job_list_parameters(),
        ),
        (
            "job_kill",
            texts::JOB_KILL_DESCRIPTION,
            job_tools::job_kill_parameters(),
        ),
    ] {
        assert_eq!(
            description,
            f[name]["description"].as_str().unwrap(),
            "{name}"
        );
        assert_eq!(
            serde_json::to_string(&params).unwrap(),
            serde_json::to_string(&f[name]["parameters"]).unwrap(),
            "{name}"
        );
    }
}
