use super::*;
use pretty_assertions::assert_eq;
use serde_json::json;

fn shape<T: Serialize>(view: &T) -> Value {
    serde_json::to_value(view).unwrap()
}

#[test]
fn call_views_serialise_tagged_by_card_with_camel_case_keys() {
    let generic = ToolCallView::generic("Read a.rs")
        .kind(ToolCallKind::Read)
        .raw_input(json!({"file_path": "a.rs"}))
        .locations(vec![FileLocation {
            path: "a.rs".into(),
            line: Some(3),
        }]);
    assert_eq!(
        shape(&generic),
        json!({"card":"generic","title":"Read a.rs","kind":"read","rawInput":{"file_path":"a.rs"},"locations":[{"path":"a.rs","line":3}]})
    );
    assert_eq!(
        shape(&ToolCallView::generic("t")),
        json!({"card":"generic","title":"t"})
    );
    let terminal = ToolCallView::terminal("ls -la", Some("List files".into()), None);
    assert_eq!(
        shape(&terminal),
        json!({"card":"terminal","title":"ls -la","description":"List files"})
    );
    let diff = ToolCallView::diff(
        "Write b.rs",
        vec![FileDiff {
            path: "b.rs".into(),
            old_text: None,
            new_text: "fn main() {}".into(),
        }],
    );
    assert_eq!(
        shape(&diff),
        json!({"card":"diff","title":"Write b.rs","diffs":[{"path":"b.rs","oldText":null,"newText":"fn main() {}"}]})
    );
    let back: ToolCallView = serde_json::from_value(shape(&diff)).unwrap();
    assert_eq!(back, diff);
}

#[test]
fn result_views_cover_every_kind() {
    assert_eq!(
        shape(&ToolResultView::Generic {
            title: None,
            content: None
        }),
        json!({"card":"generic"})
    );
    assert_eq!(
        shape(&ToolResultView::terminal(
            None,
            Some("out".into()),
            Some(TerminalExit::Code(0))
        )),
        json!({"card":"terminal","output":"out","exitCode":0})
    );
    assert_eq!(
        shape(&ToolResultView::terminal(
            None,
            None,
            Some(TerminalExit::Signal("SIGKILL".into()))
        )),
        json!({"card":"terminal","signal":"SIGKILL"})
    );
    let matches = ToolResultView::Search(SearchView::Matches {
        title: None,
        files: vec![SearchFile {
            path: "a".into(),
            matches: vec![SearchMatch {
                line_number: 2,
                line: "x".into(),
            }],
        }],
        truncated: false,
        total: 1,
    });
    assert_eq!(
        shape(&matches),
        json!({"card":"search","shape":"matches","files":[{"path":"a","matches":[{"lineNumber":2,"line":"x"}]}],"truncated":false,"total":1})
    );
    let paths = ToolResultView::Search(SearchView::Paths {
        title: Some("t".into()),
        paths: vec!["a".into()],
        truncated: true,
        total: 9,
    });
    assert_eq!(
        shape(&paths),
        json!({"card":"search","shape":"paths","title":"t","paths":["a"],"truncated":true,"total":9})
    );
    let read = ToolResultView::Read {
        title: None,
        path: "/w/a.rs".into(),
        offset: 5,
        lines: vec![],
        total_lines: 4,
        lang: Some("rust".into()),
        content: None,
    };
    assert_eq!(
        shape(&read),
        json!({"card":"read","path":"/w/a.rs","offset":5,"lines":[],"totalLines":4,"lang":"rust"})
    );
    let search = ToolResultView::Web(WebView::Search {
        title: None,
        sources: vec![WebSource {
            url: "https://x".into(),
            title: None,
            snippet: None,
            published_at: Some("2026".into()),
        }],
        answer: None,
        truncated: false,
    });
    assert_eq!(
        shape(&search),
        json!({"card":"web","kind":"search","sources":[{"url":"https://x","publishedAt":"2026"}],"truncated":false})
    );
    let fetch = ToolResultView::Web(WebView::Fetch {
        title: None,
        url: "https://x".into(),
        status_code: 200,
        truncated: false,
    });
    assert_eq!(
        shape(&fetch),
        json!({"card":"web","kind":"fetch","url":"https://x","statusCode":200,"truncated":false})
    );
    for view in [matches, paths, read, search, fetch] {
        let back: ToolResultView = serde_json::from_value(shape(&view)).unwrap();
        assert_eq!(back, view);
    }
}

#[test]
fn fallback_cards() {
    let args = json!({"a": 1});
    assert_eq!(
        call_card(None, "echo", &args),
        ToolCallView::Generic {
            title: "echo".into(),
            kind: None,
            raw_input: Some(args.clone()),
            content: None,
            locations: None
        }
    );
    let view = ResultView {
        content: vec![],
        is_error: false,
        meta: None,
    };
    assert_eq!(result_card(None, &args, &view), None);
}

#[test]
fn arguments_parse_empty_as_object_and_keep_the_raw_string_when_not_json() {
    assert_eq!(parse_arguments(""), json!({}));
    assert_eq!(parse_arguments("  "), json!({}));
    assert_eq!(parse_arguments("{\"x\":[1]}"), json!({"x": [1]}));
    // Never `Null`: a presenter and the tool see what the model sent.
    assert_eq!(parse_arguments("{oops"), json!("{oops"));
    assert_eq!(parse_arguments("null"), serde_json::Value::Null);
}
