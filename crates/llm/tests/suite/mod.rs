mod conformance;
mod errors;
mod server;
mod stream;
