mod cancel;
mod flow;
mod headless;
mod prompt;
mod requests;
mod retry;
mod support;
mod tools;
