use pretty_assertions::assert_eq;

use super::html_to_markdown;

/// The page served in the recorded `web-fetch` scenario, and the text upstream produced.
const RECORDED_PAGE: &str = "<!doctype html>\n<html><head><title>Menu</title><style>.x{color:red}</style><script>ignored()</script></head>\n<body>\n<h1>Caf&eacute; menu</h1>\n<p>Prices include <strong>service &amp; <em>tax</em></strong> &mdash; updated daily.</p>\n<ul><li>Espresso</li><li>Flat white</li></ul>\n<table><thead><tr><th>Drink</th><th>Price</th></tr></thead><tbody><tr><td>Espresso</td><td>&euro;2</td></tr><tr><td>Flat white</td><td>&euro;3</td></tr></tbody></table>\n<p>See <a href=\"https://fixture.invalid/specials\">today&rsquo;s specials</a>.</p>\n</body></html>\n";
const RECORDED_TEXT: &str = "Menu\n\n# Café menu\n\nPrices include **service & _tax_** — updated daily.\n\n-   Espresso\n-   Flat white\n\n| Drink | Price |\n| --- | --- |\n| Espresso | €2  |\n| Flat white | €3  |\n\nSee [today’s specials](https://fixture.invalid/specials).";

#[test]
fn recorded_page_converts_byte_for_byte() {
    assert_eq!(html_to_markdown(RECORDED_PAGE), RECORDED_TEXT);
}

#[test]
fn headings_are_atx() {
    assert_eq!(
        html_to_markdown("<h2>Two</h2><h6>Six</h6>"),
        "## Two\n\n###### Six"
    );
}

#[test]
fn paragraphs_collapse_whitespace_and_separate_with_blank_lines() {
    assert_eq!(
        html_to_markdown("<p>  one\n   two  </p>\n\n<p>three</p>"),
        "one two\n\nthree"
    );
}

#[test]
fn strong_and_emphasis_use_turndown_delimiters() {
    assert_eq!(
        html_to_markdown("<p><b>bold</b> and <i>it</i> and <em> spaced </em>x</p>"),
        "**bold** and _it_ and _spaced_ x"
    );
    assert_eq!(html_to_markdown("<p>a<strong> </strong>b</p>"), "a b");
}

#[test]
fn links_and_images() {
    assert_eq!(
        html_to_markdown("<p><a href=\"/x(1)\" title=\"T\">go</a> <a>plain</a></p>"),
        "[go](/x\\(1\\) \"T\") plain"
    );
    assert_eq!(
        html_to_markdown("<p><img src=\"a.png\" alt=\"A\"></p>"),
        "![A](a.png)"
    );
}

#[test]
fn ordered_and_nested_lists() {
    assert_eq!(
        html_to_markdown("<ol start=\"3\">\n<li>three</li>\n<li>four</li>\n</ol>"),
        "3.  three\n4.  four"
    );
    assert_eq!(
        html_to_markdown("<ul><li>a<ul><li>b</li></ul></li><li>c</li></ul>"),
        "-   a\n    -   b\n-   c"
    );
    assert_eq!(
        html_to_markdown("<ul><li>one<li>two</ul>"),
        "-   one\n-   two"
    );
}

#[test]
fn code_inline_and_fenced() {
    assert_eq!(
        html_to_markdown("<p>run <code>a_b*</code> now</p>"),
        "run `a_b*` now"
    );
    assert_eq!(
        html_to_markdown(
            "<pre><code class=\"language-rust\">fn main() {\n    x();\n}\n</code></pre>"
        ),
        "```rust\nfn main() {\n    x();\n}\n```"
    );
    assert_eq!(html_to_markdown("<p><code>a`b</code></p>"), "``a`b``");
}

#[test]
fn line_breaks_and_rules() {
    assert_eq!(
        html_to_markdown("<p>a<br>b</p><hr><p>c</p>"),
        "a  \nb\n\n* * *\n\nc"
    );
}

#[test]
fn markdown_characters_in_text_are_escaped() {
    assert_eq!(
        html_to_markdown("<p>a*b_c [d] `e` \\</p><p>- item</p><p>1. one</p><p># h</p>"),
        "a\\*b\\_c \\[d\\] \\`e\\` \\\\\n\n\\- item\n\n1\\. one\n\n\\# h"
    );
}

#[test]
fn script_style_noscript_and_comments_are_removed() {
    assert_eq!(
        html_to_markdown(
            "<p>a<!-- hidden --></p><script>x<y</script><noscript>n</noscript><style>p{}</style><p>b</p>"
        ),
        "a\n\nb"
    );
}

#[test]
fn tables_pad_cells_and_escape_pipes() {
    assert_eq!(
        html_to_markdown(
            "<table>\n<tr><th align=\"right\">A</th><th>Bee</th></tr>\n<tr><td> x|y </td><td></td></tr>\n</table>"
        ),
        "| A   | Bee |\n| --: | --- |\n| x\\|y |     |"
    );
}

#[test]
fn blockquotes_prefix_each_line() {
    assert_eq!(
        html_to_markdown("<blockquote><p>one</p><p>two</p></blockquote>"),
        "> one\n> \n> two"
    );
}

#[test]
fn gfm_strikethrough_and_task_lists() {
    assert_eq!(html_to_markdown("<p><del>old</del> new</p>"), "~old~ new");
    assert_eq!(
        html_to_markdown(
            "<ul><li><input type=\"checkbox\" checked>done</li><li><input type=\"checkbox\">todo</li></ul>"
        ),
        "-   [x] done\n-   [ ] todo"
    );
}

#[test]
fn fifty_thousand_nested_divs_convert_without_exhausting_the_stack() {
    let depth = 50_000;
    let html = format!(
        "{}<p>deep <b>text</b></p>{}<p>after</p>",
        "<div>".repeat(depth),
        "</div>".repeat(depth)
    );
    // Markup past the depth bound is dropped; its text is kept.
    assert_eq!(html_to_markdown(&html), "deep text\n\nafter");
    let shallow = format!(
        "{}<p>deep <b>text</b></p>{}",
        "<div>".repeat(150),
        "</div>".repeat(150)
    );
    assert_eq!(html_to_markdown(&shallow), "deep **text**");
}

#[test]
fn deep_quotes_and_lists_are_flattened_below_the_depth_bound() {
    let depth = 20_000;
    let quotes = format!(
        "{}inner{}",
        "<blockquote>".repeat(depth),
        "</blockquote>".repeat(depth)
    );
    let out = html_to_markdown(&quotes);
    assert!(out.ends_with("inner"), "{}", &out[out.len() - 40..]);
    assert!(out.starts_with("> > > "));
    let lists = format!(
        "{}item{}",
        "<ul><li>".repeat(depth),
        "</li></ul>".repeat(depth)
    );
    let out = html_to_markdown(&lists);
    assert!(out.starts_with("-   -   -   "), "{}", &out[..40]);
    assert!(out.trim_end().ends_with("item"));
}

#[test]
fn named_entities_come_from_the_complete_table() {
    assert_eq!(
        html_to_markdown(
            "<p>&CounterClockwiseContourIntegral; &NotNestedGreaterGreater; &bne; &copy 2026 \
             &amp;amp; &#x1F600; &#128512; &fjlig; &zwj;x &NotAnEntity;</p>"
        ),
        "∳ ⪢̸ =⃥ © 2026 &amp; 😀 😀 fj \u{200d}x &NotAnEntity;"
    );
}

#[test]
fn script_and_style_bodies_are_raw_text_and_dropped() {
    assert_eq!(
        html_to_markdown(
            "<p>a</p><script>var s = \"<p>no</p></div>\";</script><style>p{}</style><p>b</p>"
        ),
        "a\n\nb"
    );
}

#[test]
fn wide_documents_keep_every_sibling_in_order() {
    let blocks = 20_000;
    let html: String = (0..blocks)
        .map(|i| format!("<p>para {i}</p><script>x()</script>"))
        .collect();
    let out = html_to_markdown(&html);
    assert_eq!(out.split("\n\n").count(), blocks);
    assert!(out.ends_with(&format!("para {}", blocks - 1)));
    let items: String = (0..5_000).map(|i| format!("<li>{i}</li>")).collect();
    let out = html_to_markdown(&format!("<ol>{items}</ol>"));
    assert!(out.starts_with("1.  0\n2.  1\n"));
    assert!(out.ends_with("5000.  4999"));
    let rows: String = (0..3_000)
        .map(|i| format!("<tr><td>{i}</td><td>x</td></tr>"))
        .collect();
    let out = html_to_markdown(&format!(
        "<table><tr><th>n</th><th>v</th></tr>{rows}</table>"
    ));
    assert!(
        out.starts_with("| n   | v   |\n| --- | --- |\n| 0   | x   |"),
        "{}",
        &out[..60]
    );
    assert_eq!(out.lines().count(), 3_002);
}
