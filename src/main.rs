//! The `callcheck` binary: parse the command line once, run the subcommand, map errors to exit
//! codes ([`callcheck::cmd::exit`]).

use callcheck::cli::{Cli, Command};
use callcheck::cmd::{self, exit};
use clap::Parser;

/// A build holds hundreds of thousands of small allocations alive across two threads and frees
/// as many: glibc's allocator spent a quarter of a 100,000-sample build in malloc and free, and
/// kept freed memory in per-thread arenas.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in mimalloc.h (the same position in its v2 and v3 headers; the
/// binding names only some options).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

fn main() {
    // Freed memory goes back to the system after 50 ms instead of mimalloc's default second: a
    // 100,000-sample build peaked at 219 MB with the default and 173 MB with this, at the same
    // CPU time.
    // SAFETY: an option set before any other thread exists.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 50) };
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Build(o) => cmd::build::run(o),
        Command::Check(o) => cmd::check::run(o),
        Command::Tasks { command } => cmd::tasks::run(command),
        Command::Collect(o) => cmd::collect::run(o),
        Command::Mock(o) => cmd::mock::run(o),
        Command::Demo(o) => cmd::demo::run(o),
        Command::Export { command } => cmd::export::run(command),
        Command::Import { command } => cmd::import::run(command),
        Command::Completions(o) => cmd::completions::run(o),
        Command::Plan(o) => cmd::plan::run(o),
        Command::Compare(o) => match cmd::compare::run(o) {
            Ok(code) => std::process::exit(code),
            Err(e) => {
                // A regression is exit 1; a command that could not compare is a usage error.
                eprintln!(
                    "error: {}",
                    callcheck::term::escape_lines(&format!("{e:#}"))
                );
                std::process::exit(exit::USAGE);
            }
        },
    };
    if let Err(e) = result {
        // An error can quote a server's body: shown, never obeyed.
        eprintln!(
            "error: {}",
            callcheck::term::escape_lines(&format!("{e:#}"))
        );
        std::process::exit(exit::FAILURE);
    }
}
