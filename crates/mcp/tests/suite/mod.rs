mod checklist_gaps;
mod elicitation;
mod http;
mod prompt_commands;
mod protocol;
mod sse;
mod stdio;
mod support;
