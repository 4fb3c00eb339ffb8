mod support;

mod authoring;
mod cancel;
mod hot_reload;
mod identity;
mod pipeline;
mod registration;
mod scoped;
