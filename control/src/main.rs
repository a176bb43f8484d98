//! `partyline-control`: see the crate documentation in `lib.rs`.

use clap::Parser;

fn main() -> std::process::ExitCode {
    partyline_control::run(partyline_control::Cli::parse())
}
