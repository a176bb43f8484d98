//! The `partyline-crew` binary as a user runs it, with no server to talk to: the plain tier
//! (no services). A failed join is a clear error and a failing exit, never a panic.

use std::process::Command;

fn crew(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_partyline-crew")).args(args).output().expect("run partyline-crew")
}

#[test]
fn a_server_that_does_not_answer_fails_every_join_with_the_reason() {
    // A port nobody listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let server = format!("http://127.0.0.1:{port}");
    let output = crew(&[
        "--server",
        &server,
        "--listen",
        "stage",
        "--talk",
        "stage",
        "--users",
        "2",
        "--ramp",
        "0",
        "--duration",
        "1",
        "--media-address",
        "127.0.0.1",
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("2 of 2 joins failed") && stderr.contains("/api/token"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn https_without_a_pin_or_insecure_is_refused_before_anything_is_sent() {
    let output = crew(&["--server", "https://192.0.2.1:8443", "--position", "deck"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("--certificate-sha256"), "{stderr}");
}
