mod background;
mod escalation;
mod foreground;
mod recorded;
mod registry;
mod sandbox;
mod schemas;
mod support;
