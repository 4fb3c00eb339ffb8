//! `WorkflowMeta` and its validation (every violation, joined).

use serde_json::Value;

use crate::error::WorkflowError;
use crate::error::code;

/// One declared phase.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Phase {
    pub title: String,
    pub detail: Option<String>,
    pub provider: Option<String>,
    pub model: Option<String>,
}

/// `{name, description, whenToUse?, phases?}`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WorkflowMeta {
    pub name: String,
    pub description: String,
    pub when_to_use: Option<String>,
    pub phases: Vec<Phase>,
}

fn non_empty(value: Option<&Value>) -> Option<String> {
    value
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// Validates `meta`; all violations in one `invalid meta: a; b` error (`META_INVALID`).
pub fn validate_meta(meta: &Value) -> Result<WorkflowMeta, WorkflowError> {
    let mut violations: Vec<String> = Vec::new();
    let Value::Object(map) = meta else {
        return Err(invalid(vec!["meta must be an object".to_owned()]));
    };
    for key in map.keys() {
        if !matches!(
            key.as_str(),
            "name" | "description" | "whenToUse" | "phases"
        ) {
            violations.push(format!(
                "meta.{key} is not a recognized field (name/description/whenToUse/phases)"
            ));
        }
    }
    let name = non_empty(map.get("name"));
    if name.is_none() {
        violations.push("meta.name must be a non-empty string".to_owned());
    }
    let description = non_empty(map.get("description"));
    if description.is_none() {
        violations.push("meta.description must be a non-empty string".to_owned());
    }
    let when_to_use = match map.get("whenToUse") {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            violations.push("meta.whenToUse must be a string".to_owned());
            None
        }
    };
    let mut phases = Vec::new();
    match map.get("phases") {
        None => {}
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                let Value::Object(phase) = item else {
                    violations.push(format!("meta.phases[{i}] must be an object"));
                    continue;
                };
                for key in phase.keys() {
                    if !matches!(key.as_str(), "title" | "detail" | "provider" | "model") {
                        violations
                            .push(format!("meta.phases[{i}].{key} is not a recognized field"));
                    }
                }
                let title = non_empty(phase.get("title"));
                if title.is_none() {
                    violations.push(format!("meta.phases[{i}].title must be a non-empty string"));
                }
                let mut optional = |key: &str| match phase.get(key) {
                    None => None,
                    Some(Value::String(s)) => Some(s.clone()),
                    Some(_) => {
                        violations.push(format!("meta.phases[{i}].{key} must be a string"));
                        None
                    }
                };
                let detail = optional("detail");
                let provider = optional("provider");
                let model = optional("model");
                phases.push(Phase {
                    title: title.unwrap_or_default(),
                    detail,
                    provider,
                    model,
                });
            }
        }
        Some(_) => violations.push("meta.phases must be an array".to_owned()),
    }
    if !violations.is_empty() {
        return Err(invalid(violations));
    }
    Ok(WorkflowMeta {
        name: name.unwrap_or_default(),
        description: description.unwrap_or_default(),
        when_to_use,
        phases,
    })
}

fn invalid(violations: Vec<String>) -> WorkflowError {
    WorkflowError::new(
        code::META_INVALID,
        format!("invalid meta: {}", violations.join("; ")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn every_violation_is_reported_in_one_message() {
        let error = validate_meta(&json!({
            "name": "",
            "extra": 1,
            "whenToUse": 3,
            "phases": [{"title": "", "detail": 1, "color": "red"}, 5]
        }))
        .unwrap_err();
        assert_eq!(error.code, "META_INVALID");
        assert_eq!(
            error.message,
            "invalid meta: meta.extra is not a recognized field (name/description/whenToUse/phases); meta.name must be a non-empty string; meta.description must be a non-empty string; meta.whenToUse must be a string; meta.phases[0].color is not a recognized field; meta.phases[0].title must be a non-empty string; meta.phases[0].detail must be a string; meta.phases[1] must be an object"
        );
        assert_eq!(
            validate_meta(&json!([])).unwrap_err().message,
            "invalid meta: meta must be an object"
        );
        assert_eq!(
            validate_meta(&json!({"name": "n", "description": "d", "phases": {}}))
                .unwrap_err()
                .message,
            "invalid meta: meta.phases must be an array"
        );
        let meta =
            validate_meta(&json!({"name": "n", "description": "d", "phases": [{"title": "t"}]}))
                .unwrap();
        assert_eq!(meta.phases[0].title, "t");
    }
}
