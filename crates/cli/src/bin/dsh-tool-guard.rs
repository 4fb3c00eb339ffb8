//! `dsh-tool-guard`: the process guard dsh starts each unconfined tool command under (see the
//! `dsh-tool-guard` crate). Kept apart from `dsh` so that starting it costs a small executable,
//! not the whole harness; it must link nothing but that crate.

fn main() -> std::process::ExitCode {
    dsh_tool_guard::main()
}
