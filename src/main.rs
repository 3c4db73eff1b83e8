use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = replicheck::cli::Cli::parse();
    if cli.dies_quietly_on_closed_output() {
        replicheck::cli::die_quietly_on_closed_output();
    }
    match replicheck::cli::run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("replicheck: error: {err}");
            ExitCode::from(err.exit_code())
        }
    }
}

// Exploration clones millions of small states: glibc malloc spent most of the time in its
// free lists; mimalloc's thread-local pages do not.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
