//! The process guard on its own, for this crate's tests and benches (the shipped guard
//! executable is the `dsh` package's `dsh-tool-guard`; the same `main`).

fn main() -> std::process::ExitCode {
    dsh_tool_guard::main()
}
