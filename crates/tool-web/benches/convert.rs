//! HTML → Markdown conversion of hostile shapes at growing sizes: deep nesting (up to the
//! 50,000 `<div>`s that once overflowed the stack) and wide documents of sibling blocks with a
//! `<script>` every 50 (once quadratic). Throughput is per element, so a linear converter shows
//! a flat time per element across sizes.
//! `cargo bench -p dsh-tool-web --bench convert`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;

use criterion::BenchmarkId;
use criterion::Criterion;
use criterion::Throughput;
use criterion::criterion_group;
use criterion::criterion_main;
use dsh_tool_web::html_to_markdown;

/// `depth` nested `<div>`s around one paragraph.
fn nested(depth: usize) -> String {
    format!(
        "<html><body>{}<p>deep text</p>{}</body></html>",
        "<div>".repeat(depth),
        "</div>".repeat(depth)
    )
}

/// `blocks` sibling paragraphs with inline markup and entities, a `<script>` every 50.
fn wide(blocks: usize) -> String {
    let mut html = String::with_capacity(blocks * 90 + 64);
    html.push_str("<html><body>");
    for i in 0..blocks {
        html.push_str("<p>Paragraph <b>number</b> ");
        html.push_str(&i.to_string());
        html.push_str(" with <a href=\"/x\">a link</a> &amp; caf&eacute; text.</p>");
        if i % 50 == 0 {
            html.push_str("<script>var x = \"<p>not text</p>\";</script>");
        }
    }
    html.push_str("</body></html>");
    html
}

/// `items` list items, for the per-sibling list and numbering rules.
fn list(items: usize) -> String {
    let body: String = (0..items).map(|i| format!("<li>item {i}</li>")).collect();
    format!("<ol>{body}</ol>")
}

fn convert(c: &mut Criterion) {
    let mut group = c.benchmark_group("web_convert");
    group.sample_size(10);
    for depth in [500, 5_000, 50_000] {
        let html = nested(depth);
        group.throughput(Throughput::Elements(depth as u64));
        group.bench_with_input(BenchmarkId::new("nested_divs", depth), &html, |b, html| {
            b.iter(|| black_box(html_to_markdown(html)))
        });
    }
    for blocks in [1_000, 4_000, 16_000] {
        let html = wide(blocks);
        group.throughput(Throughput::Elements(blocks as u64));
        group.bench_with_input(
            BenchmarkId::new("sibling_blocks", blocks),
            &html,
            |b, html| b.iter(|| black_box(html_to_markdown(html))),
        );
    }
    for items in [1_000, 8_000] {
        let html = list(items);
        group.throughput(Throughput::Elements(items as u64));
        group.bench_with_input(BenchmarkId::new("list_items", items), &html, |b, html| {
            b.iter(|| black_box(html_to_markdown(html)))
        });
    }
    group.finish();
}

criterion_group!(benches, convert);
criterion_main!(benches);
