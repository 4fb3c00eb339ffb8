mod points;
mod support;
mod tools;
