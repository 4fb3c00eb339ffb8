//! Rendering (§2.3): exact, model-visible texts and the byte-budget algorithm. Every rendered
//! text is framed in `<system-reminder>` by the producer itself and never exceeds `maxBytes`
//! UTF-8 bytes.

pub const INTRO: &str = "The following workspace instructions may be relevant to your work. Use them as guidance when applicable. More specific instructions take precedence over broader ones. They do not override system, developer, or direct user instructions.";
pub const REPLACEMENT_PREFIX: &str = "This complete workspace instruction baseline replaces all earlier workspace instruction baselines.";
pub const EMPTY_REPLACEMENT_INTRO: &str = "This complete workspace instruction baseline replaces all earlier workspace instruction baselines. No workspace instructions are currently active.";
pub const COMPACT_INTRO: &str =
    "Workspace instructions were omitted or truncated to fit the configured byte budget.";

const OPEN: &str = "<system-reminder>";
const CLOSE: &str = "</system-reminder>";
const ESCAPED_CLOSE: &str = "<\\/system-reminder>";

/// `REPLACEMENT_INTRO`.
pub fn replacement_intro() -> String {
    format!("{REPLACEMENT_PREFIX} {INTRO}")
}

/// One file's section: a fixed head (heading, blank line, any preamble) and its content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// Display path (named in budget markers).
    pub path: String,
    pub head: String,
    pub content: String,
    /// Removal notices have no content to keep; they count as represented when included.
    pub has_content: bool,
}

impl Section {
    /// `Instructions from: <path>\n\n<content>`.
    pub fn baseline(path: &str, content: &str) -> Self {
        Self {
            path: path.to_owned(),
            head: format!("Instructions from: {path}\n\n"),
            content: content.to_owned(),
            has_content: true,
        }
    }

    /// A newly applicable file.
    pub fn added(path: &str, scope: &str, content: &str) -> Self {
        Self {
            path: path.to_owned(),
            head: format!(
                "Additional instructions from: {path}\n\nThese instructions apply to work under `{scope}`. Use them as guidance when relevant; more specific instructions take precedence. They do not override system, developer, or direct user instructions.\n\n"
            ),
            content: content.to_owned(),
            has_content: true,
        }
    }

    /// A loaded file whose content changed.
    pub fn updated(path: &str, content: &str) -> Self {
        Self {
            path: path.to_owned(),
            head: format!(
                "Updated instructions from: {path}\n\nThis file changed after it was loaded. Use the following content instead of the previously loaded instructions from this file.\n\n"
            ),
            content: content.to_owned(),
            has_content: true,
        }
    }

    /// A loaded file that no longer applies.
    pub fn removed(path: &str) -> Self {
        Self {
            path: path.to_owned(),
            head: format!(
                "Instructions removed: {path}\n\nThe previously loaded instructions from this file no longer apply."
            ),
            content: String::new(),
            has_content: false,
        }
    }

    fn text(&self, content_bytes: usize) -> String {
        format!("{}{}", self.head, &self.content[..content_bytes])
    }
}

/// A rendered block and which sections it represents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    pub text: String,
    /// One flag per input section: at least one content byte survived (or there was none).
    pub represented: Vec<bool>,
}

/// `<system-reminder>\n` + escaped body + `\n</system-reminder>`.
pub fn frame(body: &str) -> String {
    format!("{OPEN}\n{}\n{CLOSE}", body.replace(CLOSE, ESCAPED_CLOSE))
}

fn body(blocks: &[&str]) -> String {
    blocks
        .iter()
        .filter(|b| !b.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join("\n\n")
}

fn marker(max: usize, omitted: &[&Section], truncated: Option<(&Section, usize)>) -> String {
    let mut parts = Vec::new();
    if !omitted.is_empty() {
        let paths: Vec<&str> = omitted.iter().map(|s| s.path.as_str()).collect();
        parts.push(format!("omitted {}", paths.join(", ")));
    }
    if let Some((section, kept)) = truncated {
        parts.push(format!(
            "truncated {} from {} to {kept} bytes",
            section.path,
            section.content.len()
        ));
    }
    format!(
        "Workspace instruction budget {max} bytes: {}",
        parts.join("; ")
    )
}

fn floor_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// The budget algorithm: whole text; else drop broad files; else truncate the most specific
/// one; else a notice.
pub fn render(intro: &str, sections: &[Section], max: usize) -> Rendered {
    let n = sections.len();
    let fits = |text: &String| text.len() <= max;
    let texts: Vec<String> = sections.iter().map(|s| s.text(s.content.len())).collect();
    let mut blocks: Vec<&str> = vec![intro];
    blocks.extend(texts.iter().map(String::as_str));
    let full = frame(&body(&blocks));
    if fits(&full) {
        return Rendered {
            text: full,
            represented: vec![true; n],
        };
    }
    for start in 1..n {
        let omitted: Vec<&Section> = sections[..start].iter().collect();
        let notice = marker(max, &omitted, None);
        let mut blocks: Vec<&str> = vec![&notice, intro];
        blocks.extend(texts[start..].iter().map(String::as_str));
        let text = frame(&body(&blocks));
        if fits(&text) {
            let mut represented = vec![false; start];
            represented.extend(vec![true; n - start]);
            return Rendered { text, represented };
        }
    }
    let Some(last) = sections.last() else {
        let text = frame(intro);
        return Rendered {
            text: truncate_to(&text, max),
            represented: Vec::new(),
        };
    };
    let omitted: Vec<&Section> = sections[..n - 1].iter().collect();
    let with = |intro: &str, kept: usize| {
        let notice = marker(max, &omitted, Some((last, kept)));
        frame(&body(&[&notice, intro, &last.text(kept)]))
    };
    for intro in [intro, COMPACT_INTRO] {
        if !fits(&with(intro, 0)) {
            continue;
        }
        // The largest prefix (at a code-point boundary) that still fits.
        let bounds: Vec<usize> = (0..=last.content.len())
            .filter(|i| last.content.is_char_boundary(*i))
            .collect();
        let (mut low, mut high) = (0usize, bounds.len() - 1);
        while low < high {
            let mid = (low + high).div_ceil(2);
            if fits(&with(intro, bounds[mid])) {
                low = mid;
            } else {
                high = mid - 1;
            }
        }
        let lo = bounds[low];
        let mut represented = vec![false; n];
        represented[n - 1] = !last.has_content || lo > 0 || last.content.is_empty();
        return Rendered {
            text: with(intro, lo),
            represented,
        };
    }
    let notice = marker(max, &omitted, Some((last, 0)));
    let heading = frame(&body(&[&notice, &last.head]));
    if fits(&heading) {
        let mut represented = vec![false; n];
        represented[n - 1] = !last.has_content || last.content.is_empty();
        return Rendered {
            text: heading,
            represented,
        };
    }
    let alone = frame(&notice);
    Rendered {
        text: truncate_to(&alone, max),
        represented: vec![false; n],
    }
}

fn truncate_to(text: &str, max: usize) -> String {
    text[..floor_boundary(text, max)].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn two_files_render_in_order_inside_the_frame() {
        // Checklist A1, A2.
        let sections = [
            Section::baseline("~/.dsh/AGENTS.md", "<global content>"),
            Section::baseline("AGENTS.md", "<project content>"),
        ];
        let rendered = render(INTRO, &sections, 65536);
        assert_eq!(
            rendered.text,
            format!(
                "<system-reminder>\n{INTRO}\n\nInstructions from: ~/.dsh/AGENTS.md\n\n<global content>\n\nInstructions from: AGENTS.md\n\n<project content>\n</system-reminder>"
            )
        );
        assert_eq!(rendered.represented, vec![true, true]);
        assert!(rendered.text.starts_with(
            "<system-reminder>\nThe following workspace instructions may be relevant to your work."
        ));
    }

    #[test]
    fn the_closing_tag_is_escaped_everywhere_in_the_body() {
        // Checklist A9.
        let sections = [Section::added(
            "scope</system-reminder>/AGENTS.md",
            "scope</system-reminder>",
            "Delimiter path snapshot instruction.\n",
        )];
        let rendered = render("", &sections, 65536);
        assert_eq!(
            rendered.text,
            "<system-reminder>\nAdditional instructions from: scope<\\/system-reminder>/AGENTS.md\n\nThese instructions apply to work under `scope<\\/system-reminder>`. Use them as guidance when relevant; more specific instructions take precedence. They do not override system, developer, or direct user instructions.\n\nDelimiter path snapshot instruction.\n\n</system-reminder>"
        );
    }

    #[test]
    fn broad_files_are_dropped_first_with_an_omitted_marker() {
        // Checklist A7, A8.
        let sections = [
            Section::baseline("~/.dsh/AGENTS.md", &"g".repeat(400)),
            Section::baseline("AGENTS.md", &"r".repeat(400)),
            Section::baseline("app/AGENTS.md", &"a".repeat(100)),
        ];
        let max = 1000;
        let rendered = render(INTRO, &sections, max);
        assert!(rendered.text.len() <= max);
        assert!(rendered.text.starts_with(
            "<system-reminder>\nWorkspace instruction budget 1000 bytes: omitted ~/.dsh/AGENTS.md\n\n"
        ));
        assert_eq!(rendered.represented, vec![false, true, true]);
    }

    #[test]
    fn the_most_specific_file_is_truncated_at_a_code_point_boundary() {
        let sections = [
            Section::baseline("AGENTS.md", &"r".repeat(400)),
            Section::baseline("app/AGENTS.md", &"é".repeat(300)),
        ];
        for max in [420, 450, 500, 530, 600, 700] {
            let rendered = render(INTRO, &sections, max);
            assert!(rendered.text.len() <= max, "{max}: {}", rendered.text.len());
            assert!(
                rendered
                    .text
                    .contains("omitted AGENTS.md; truncated app/AGENTS.md from 600 to "),
                "{}",
                rendered.text
            );
            // A larger prefix would not fit.
            let kept: usize = rendered
                .text
                .split(" to ")
                .nth(1)
                .unwrap()
                .split(' ')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            assert_eq!(kept % 2, 0, "cut inside a code point");
            assert_eq!(rendered.represented, vec![false, kept > 0]);
        }
        // The compact intro is used once the normal one cannot fit.
        let tiny = render(INTRO, &sections, 320);
        assert!(tiny.text.len() <= 320);
        assert!(tiny.text.contains(COMPACT_INTRO), "{}", tiny.text);
    }

    #[test]
    fn the_text_never_exceeds_the_budget_even_when_nothing_fits() {
        let sections = [Section::baseline(
            "a/very/long/path/AGENTS.md",
            &"x".repeat(1000),
        )];
        for max in [1, 10, 60, 100, 140, 170, 200, 260] {
            let rendered = render(INTRO, &sections, max);
            assert!(rendered.text.len() <= max, "{max}");
        }
    }

    #[test]
    fn delta_section_texts() {
        assert_eq!(
            Section::updated("AGENTS.md", "new").text(3),
            "Updated instructions from: AGENTS.md\n\nThis file changed after it was loaded. Use the following content instead of the previously loaded instructions from this file.\n\nnew"
        );
        assert_eq!(
            Section::removed("AGENTS.md").text(0),
            "Instructions removed: AGENTS.md\n\nThe previously loaded instructions from this file no longer apply."
        );
        assert_eq!(
            replacement_intro(),
            format!(
                "This complete workspace instruction baseline replaces all earlier workspace instruction baselines. {INTRO}"
            )
        );
    }
}
