//! Matchers (upstream `hook-protocol/src/matcher.ts`): match-all sentinels, Claude Code's
//! literal alternatives, and unanchored ECMAScript regexes (`regress`, the same dialect as
//! `new RegExp(p)`; the `regex` crate rejects look-around JS accepts).

use crate::Dialect;
use crate::HookConfigError;

/// A compiled group matcher.
#[derive(Debug, Clone)]
pub enum Matcher {
    /// Absent, `""` or `"*"`.
    All,
    /// Claude Code `[A-Za-z0-9_|]+`: exact equality with any `|` alternative.
    Literal(Vec<String>),
    /// Unanchored: tested like `RegExp.prototype.test`.
    Regex(Box<regress::Regex>),
}

fn is_literal(pattern: &str) -> bool {
    !pattern.is_empty()
        && pattern
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'|')
}

impl Matcher {
    /// Compiles `pattern` for `dialect`, or returns upstream's diagnostic
    /// `invalid <mode> regex matcher <JSON pattern>`.
    pub fn compile(pattern: Option<&str>, dialect: Dialect) -> Result<Self, HookConfigError> {
        let Some(pattern) = pattern else {
            return Ok(Self::All);
        };
        if pattern.is_empty() || pattern == "*" {
            return Ok(Self::All);
        }
        if dialect == Dialect::ClaudeCode && is_literal(pattern) {
            return Ok(Self::Literal(
                pattern.split('|').map(str::to_owned).collect(),
            ));
        }
        regress::Regex::new(pattern)
            .map(|regex| Self::Regex(Box::new(regex)))
            .map_err(|_| HookConfigError::Matcher {
                dialect,
                pattern: pattern.to_owned(),
            })
    }

    pub fn matches(&self, subject: &str) -> bool {
        match self {
            Self::All => true,
            Self::Literal(names) => names.iter().any(|name| name == subject),
            Self::Regex(regex) => regex.find(subject).is_some(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pattern: &str, dialect: Dialect) -> Matcher {
        Matcher::compile(Some(pattern), dialect).unwrap()
    }

    #[test]
    fn item_10_cc_literals_are_exact_and_codex_regexes_unanchored() {
        assert!(!m("Bash", Dialect::ClaudeCode).matches("BashOutput"));
        assert!(m("Bash", Dialect::ClaudeCode).matches("Bash"));
        assert!(m("Bash", Dialect::Codex).matches("BashOutput"));
        assert!(m("Bash.*", Dialect::ClaudeCode).matches("BashOutput"));
        assert!(m("mcp__.*", Dialect::ClaudeCode).matches("mcp__fs__read"));
    }

    #[test]
    fn item_11_alternatives_and_anchors() {
        let cc = m("Edit|Write", Dialect::ClaudeCode);
        assert!(cc.matches("Write") && cc.matches("Edit") && !cc.matches("EditFile"));
        for dialect in [Dialect::ClaudeCode, Dialect::Codex] {
            let anchored = m("^Bash$", dialect);
            assert!(anchored.matches("Bash"));
            assert!(!anchored.matches("BashOutput"));
            assert!(!anchored.matches("xBash"));
        }
    }

    #[test]
    fn item_12_sentinels_match_everything() {
        for dialect in [Dialect::ClaudeCode, Dialect::Codex] {
            for matcher in [
                Matcher::compile(None, dialect).unwrap(),
                m("", dialect),
                m("*", dialect),
            ] {
                assert!(matches!(matcher, Matcher::All));
                assert!(matcher.matches("anything"));
            }
        }
    }

    #[test]
    fn invalid_patterns_get_the_diagnostic_and_ecmascript_features_compile() {
        assert_eq!(
            Matcher::compile(Some("["), Dialect::ClaudeCode)
                .unwrap_err()
                .to_string(),
            "invalid claude-code regex matcher \"[\""
        );
        assert_eq!(
            Matcher::compile(Some("("), Dialect::Codex)
                .unwrap_err()
                .to_string(),
            "invalid codex regex matcher \"(\""
        );
        // Look-ahead and backreferences are ECMAScript, so they must be accepted.
        assert!(m("^(?!Bash)", Dialect::ClaudeCode).matches("Read"));
        assert!(!m("^(?!Bash)", Dialect::ClaudeCode).matches("Bash"));
        assert!(m("(a)\\1", Dialect::Codex).matches("xaa"));
    }
}
