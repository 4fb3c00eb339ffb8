mod checklist_gaps;
mod http;
mod protocol;
mod stdio;
mod support;
