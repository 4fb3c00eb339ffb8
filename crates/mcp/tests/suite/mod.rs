mod checklist_gaps;
mod elicitation;
mod http;
mod prompt_commands;
mod protocol;
mod stdio;
mod support;
