//! `partyline-control`: see the crate documentation in `lib.rs`.

use clap::Parser;

fn main() -> std::process::ExitCode {
    // libpulse inside this process (alsa-lib loads its PulseAudio hook when the device listing
    // asks ALSA) reads its client config from the environment: point it at control's, which
    // forbids starting a sound server. Without it the listing falls back to the built-in devices
    // rather than risk one.
    if let Some((variable, path)) = partyline_control::pulse_client_config_env() {
        // SAFETY: no other thread exists yet (the runtime and the logger start in `run`), so
        // nothing reads the environment while it changes.
        #[allow(unsafe_code)]
        unsafe {
            std::env::set_var(variable, path);
        }
    }
    partyline_control::run(partyline_control::Cli::parse())
}

/// The man page `packaging/man/partyline-control.8` (installed gzipped by the package) is
/// rendered from [`partyline_control::Cli`]: this test fails when it is stale, and
/// `UPDATE_EXPECT=1` rewrites it.
#[cfg(test)]
mod man_page {
    use clap::CommandFactory as _;

    #[test]
    fn matches_the_command_line() {
        let mut command = partyline_control::Cli::command();
        command.build(); // adds -V/--version while the version is still set
        // Neither version nor date in the page: it changes only when the command line does. The
        // empty date is quoted, else .TH's next argument (the source) would take its place.
        let man = clap_mangen::Man::new(command.version(None)).section("8").date("\"\"").source("partyline");
        let mut page = Vec::new();
        man.render(&mut page).expect("render the man page");
        let page = String::from_utf8(page).expect("UTF-8");
        expect_test::expect_file!["../../packaging/man/partyline-control.8"].assert_eq(&page);
    }
}
