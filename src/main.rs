use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = replicheck::cli::Cli::parse();
    match replicheck::cli::run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("replicheck: error: {err}");
            ExitCode::from(2)
        }
    }
}
