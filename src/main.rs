use std::process::ExitCode;

#[cfg(unix)]
fn default_sigpipe() {
    // Rust ignores SIGPIPE, so `println!` into a closed pipe (`rscc … |
    // head`) panics. Restore the default action: the process ends quietly,
    // as other command-line tools do.
    unsafe extern "C" {
        fn signal(signum: i32, handler: usize) -> usize;
    }
    const SIGPIPE: i32 = 13;
    const SIG_DFL: usize = 0;
    // SAFETY: `signal` is the C library's; SIG_DFL for SIGPIPE is valid at
    // any time and no handler of ours is replaced.
    unsafe {
        signal(SIGPIPE, SIG_DFL);
    }
}

fn main() -> ExitCode {
    #[cfg(unix)]
    default_sigpipe();
    rscc::cli::main()
}
