use std::process::ExitCode;

fn main() -> ExitCode {
    rscc::cli::main()
}
