//! The process guard on its own, for this crate's tests and for embedders whose binary does
//! not call `dsh_tool_shell::guard::run_if_invoked` (the `dsh` binary serves as its own guard).

fn main() -> std::process::ExitCode {
    dsh_tool_shell::guard::run_if_invoked()
        .unwrap_or_else(|| dsh_tool_shell::guard::run(std::env::args_os().skip(1).collect()))
}
