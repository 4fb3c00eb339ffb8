mod points;
mod sandbox;
mod support;
mod tools;
