mod checklist_gaps;
mod elicitation;
mod http;
mod protocol;
mod stdio;
mod support;
