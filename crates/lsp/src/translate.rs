//! Server answers normalised to the seam's shapes (`translate.ts`): navigation results become
//! `[{uri, range}]`, hovers become `{contents, range?}` or nothing.

use serde::Serialize;
use serde_json::Value;

use crate::error::LspError;

/// A zero-based position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Position {
    pub line: u64,
    pub character: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Range {
    pub start: Position,
    pub end: Position,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Location {
    pub uri: String,
    pub range: Range,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hover {
    pub contents: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub range: Option<Range>,
}

fn position(value: &Value) -> Option<Position> {
    Some(Position {
        line: value.get("line")?.as_u64()?,
        character: value.get("character")?.as_u64()?,
    })
}

pub fn range(value: &Value) -> Option<Range> {
    Some(Range {
        start: position(value.get("start")?)?,
        end: position(value.get("end")?)?,
    })
}

/// `definition` / `references` / `implementation` results. `None` = the result was missing.
pub fn navigation(result: Option<&Value>) -> Result<Vec<Location>, LspError> {
    let result = result.ok_or_else(|| LspError::malformed("LSP navigation result was missing"))?;
    let entries: Vec<&Value> = match result {
        Value::Null => return Ok(Vec::new()),
        Value::Array(items) => items.iter().collect(),
        single => vec![single],
    };
    entries
        .into_iter()
        .map(|entry| {
            if !entry.is_object() {
                return Err(LspError::malformed(
                    "LSP navigation result contained a non-object entry",
                ));
            }
            if let (Some(uri), Some(range)) = (
                entry.get("targetUri").and_then(Value::as_str),
                entry.get("targetSelectionRange").and_then(range),
            ) {
                return Ok(Location {
                    uri: uri.to_owned(),
                    range,
                });
            }
            if let (Some(uri), Some(range)) = (
                entry.get("uri").and_then(Value::as_str),
                entry.get("range").and_then(range),
            ) {
                return Ok(Location {
                    uri: uri.to_owned(),
                    range,
                });
            }
            Err(LspError::malformed(
                "LSP navigation result contained neither a Location nor a LocationLink",
            ))
        })
        .collect()
}

fn marked_string(value: &Value) -> Result<String, LspError> {
    match value {
        Value::String(text) => Ok(text.clone()),
        Value::Object(map) => match (
            map.get("language").and_then(Value::as_str),
            map.get("value").and_then(Value::as_str),
        ) {
            (Some(language), Some(value)) => Ok(format!("```{language}\n{value}\n```")),
            _ => Err(LspError::malformed(
                "LSP hover result contained a malformed MarkedString",
            )),
        },
        _ => Err(LspError::malformed(
            "LSP hover result contained a malformed MarkedString",
        )),
    }
}

/// `hover` results. `None` = the result was missing.
pub fn hover(result: Option<&Value>) -> Result<Option<Hover>, LspError> {
    let result = result.ok_or_else(|| LspError::malformed("LSP hover result was missing"))?;
    let object = match result {
        Value::Null => return Ok(None),
        Value::Object(object) => object,
        _ => return Err(LspError::malformed("LSP hover result was not an object")),
    };
    let contents = object
        .get("contents")
        .ok_or_else(|| LspError::malformed("LSP hover result had no contents"))?;
    let text = match contents {
        Value::String(text) => text.clone(),
        Value::Array(items) => items
            .iter()
            .map(marked_string)
            .collect::<Result<Vec<_>, _>>()?
            .join("\n\n"),
        Value::Object(map) if map.contains_key("kind") => {
            let kind = map.get("kind").and_then(Value::as_str);
            if !matches!(kind, Some("markdown" | "plaintext")) {
                return Err(LspError::malformed(
                    "LSP hover contents were not MarkupContent, MarkedString, or an array",
                ));
            }
            map.get("value")
                .and_then(Value::as_str)
                .ok_or_else(|| {
                    LspError::malformed("LSP hover MarkupContent value was not a string")
                })?
                .to_owned()
        }
        Value::Object(_) => marked_string(contents)?,
        _ => {
            return Err(LspError::malformed(
                "LSP hover contents were not MarkupContent, MarkedString, or an array",
            ));
        }
    };
    let range =
        match object.get("range") {
            None | Some(Value::Null) => None,
            Some(value) => Some(range(value).ok_or_else(|| {
                LspError::malformed("LSP hover result contained a malformed range")
            })?),
        };
    if text.is_empty() {
        return Ok(None);
    }
    Ok(Some(Hover {
        contents: text,
        range,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn navigation_shapes() {
        assert_eq!(navigation(Some(&Value::Null)).unwrap(), vec![]);
        assert_eq!(
            navigation(None).unwrap_err().message,
            "LSP navigation result was missing"
        );
        let link = json!({"targetUri": "file:///a", "targetRange": {}, "targetSelectionRange": {"start": {"line": 1, "character": 2}, "end": {"line": 1, "character": 3}}});
        let located = navigation(Some(&link)).unwrap();
        assert_eq!(located[0].uri, "file:///a");
        assert_eq!(
            located[0].range.start,
            Position {
                line: 1,
                character: 2
            }
        );
        assert_eq!(
            navigation(Some(&json!([1]))).unwrap_err().message,
            "LSP navigation result contained a non-object entry"
        );
        assert_eq!(
            navigation(Some(&json!([{"uri": "x"}])))
                .unwrap_err()
                .message,
            "LSP navigation result contained neither a Location nor a LocationLink"
        );
    }

    #[test]
    fn hover_shapes() {
        assert_eq!(hover(Some(&Value::Null)).unwrap(), None);
        let fenced = hover(Some(&json!({"contents": {"language": "ts", "value": "x"}}))).unwrap();
        assert_eq!(fenced.unwrap().contents, "```ts\nx\n```");
        let markup = hover(Some(
            &json!({"contents": {"kind": "markdown", "value": "**b**"}}),
        ))
        .unwrap();
        assert_eq!(markup.unwrap().contents, "**b**");
        let list = hover(Some(
            &json!({"contents": ["a", {"language": "py", "value": "b"}]}),
        ))
        .unwrap();
        assert_eq!(list.unwrap().contents, "a\n\n```py\nb\n```");
        assert_eq!(hover(Some(&json!({"contents": ""}))).unwrap(), None);
        assert_eq!(
            hover(Some(&json!({}))).unwrap_err().message,
            "LSP hover result had no contents"
        );
        assert_eq!(
            hover(Some(&json!({"contents": "x", "range": {"start": 1}})))
                .unwrap_err()
                .message,
            "LSP hover result contained a malformed range"
        );
    }
}
