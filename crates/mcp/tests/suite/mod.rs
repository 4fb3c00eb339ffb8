mod checklist_gaps;
mod http;
mod stdio;
mod support;
