//! HTML → Markdown conversion of pathological shapes: deep nesting and many siblings, each at
//! three sizes, so a super-linear converter shows as a growing time per element.
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
    let mut html = String::with_capacity(depth * 11 + 64);
    html.push_str("<html><body>");
    for _ in 0..depth {
        html.push_str("<div>");
    }
    html.push_str("<p>deep text</p>");
    for _ in 0..depth {
        html.push_str("</div>");
    }
    html.push_str("</body></html>");
    html
}

/// `blocks` sibling paragraphs with inline markup, a `<script>` every 50.
fn wide(blocks: usize) -> String {
    let mut html = String::with_capacity(blocks * 80 + 64);
    html.push_str("<html><body>");
    for i in 0..blocks {
        html.push_str("<p>Paragraph <b>number</b> ");
        html.push_str(&i.to_string());
        html.push_str(" with <a href=\"/x\">a link</a> &amp; text.</p>");
        if i % 50 == 0 {
            html.push_str("<script>var x = 1;</script>");
        }
    }
    html.push_str("</body></html>");
    html
}

fn convert(c: &mut Criterion) {
    let mut group = c.benchmark_group("web_convert");
    group.sample_size(10);
    for depth in [500, 2_000, 8_000] {
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
    group.finish();
}

criterion_group!(benches, convert);
criterion_main!(benches);
