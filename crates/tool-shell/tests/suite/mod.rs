mod background;
mod foreground;
mod recorded;
mod registry;
mod schemas;
mod support;
