//! Delegation depth (§1.5): the child of a depth-`d` agent has depth `d + 1`; a numeric
//! `maxDepth` bounds the child's own (absolute) depth.

use serde_json::Value;

use crate::error::SubagentError;

/// `Number.MAX_SAFE_INTEGER`.
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

pub const MAX_DEPTH_INVALID: &str = "subagent maxDepth must be a non-negative safe integer";
pub const CHILD_DEPTH_OVERFLOW: &str = "subagent child depth exceeds the safe-integer range";

/// `assertSubagentMaxDepth`: a request's `maxDepth`, when present, is a safe integer.
pub fn check_max_depth(max_depth: Option<u64>) -> Result<(), SubagentError> {
    match max_depth {
        Some(depth) if depth > MAX_SAFE_INTEGER => {
            Err(SubagentError::classed("TypeError", MAX_DEPTH_INVALID))
        }
        _ => Ok(()),
    }
}

/// Reads a configured numeric `maxDepth` (a JSON number): non-negative safe integers only, and
/// never `-0`.
pub fn parse_max_depth(value: &Value) -> Result<u64, SubagentError> {
    let invalid = || SubagentError::classed("TypeError", MAX_DEPTH_INVALID);
    let Value::Number(number) = value else {
        return Err(invalid());
    };
    if let Some(depth) = number.as_u64() {
        return (depth <= MAX_SAFE_INTEGER)
            .then_some(depth)
            .ok_or_else(invalid);
    }
    Err(invalid())
}

/// `resolveChildDepth`: the child's depth, or the rejection of the attempt.
pub fn resolve_child_depth(
    parent_depth: u64,
    max_depth: Option<u64>,
) -> Result<u64, SubagentError> {
    let child = parent_depth
        .checked_add(1)
        .filter(|d| *d <= MAX_SAFE_INTEGER)
        .ok_or_else(|| SubagentError::classed("RangeError", CHILD_DEPTH_OVERFLOW))?;
    match max_depth {
        Some(max) if child > max => Err(SubagentError::classed(
            "SubagentDepthError",
            format!("subagent depth {child} exceeds maxDepth {max}"),
        )),
        _ => Ok(child),
    }
}

/// `delegationDepthOf(agent)`: the header's depth is authoritative and monotone (a resumed
/// child keeps it); this port has no separate runtime depth option.
pub fn delegation_depth_of(agent: &dsh_agent::AgentHandle) -> u64 {
    agent.log().header().delegation_depth
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_cap_is_absolute_and_counts_the_childs_own_depth() {
        assert_eq!(resolve_child_depth(0, Some(1)).unwrap(), 1);
        let err = resolve_child_depth(1, Some(1)).unwrap_err();
        assert_eq!(err.message, "subagent depth 2 exceeds maxDepth 1");
        assert_eq!(err.code, None);
        assert_eq!(err.name, "SubagentDepthError");
        assert_eq!(
            resolve_child_depth(0, Some(0)).unwrap_err().message,
            "subagent depth 1 exceeds maxDepth 0"
        );
        assert_eq!(resolve_child_depth(7, None).unwrap(), 8);
        assert_eq!(
            resolve_child_depth(MAX_SAFE_INTEGER, None)
                .unwrap_err()
                .message,
            CHILD_DEPTH_OVERFLOW
        );
    }

    #[test]
    fn max_depth_accepts_only_non_negative_safe_integers() {
        assert_eq!(parse_max_depth(&json!(3)).unwrap(), 3);
        assert_eq!(parse_max_depth(&json!(0)).unwrap(), 0);
        for bad in [
            json!(-1),
            json!(1.5),
            json!("3"),
            json!(9007199254740992u64),
            json!(-0.0),
        ] {
            assert_eq!(
                parse_max_depth(&bad).unwrap_err().message,
                MAX_DEPTH_INVALID,
                "{bad}"
            );
        }
        assert!(check_max_depth(Some(MAX_SAFE_INTEGER + 1)).is_err());
        assert!(check_max_depth(None).is_ok());
    }
}
