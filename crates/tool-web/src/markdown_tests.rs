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
