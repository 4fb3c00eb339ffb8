mod long_session;
mod manual;
mod resume;
mod support;
mod transaction;
mod triggers;
