//! The config loader: arbitrary bytes as the config file's text.
//!
//! Invariants: parsing never panics; a config that parses (legacy keys taken out) renders to
//! YAML that parses again to an equal config, with no legacy keys left and the same verdict
//! from `validate`, and renders to the same text a second time (what control writes, it can
//! read back unchanged).

#![no_main]

use libfuzzer_sys::fuzz_target;
use partyline_shared::Config;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(mut first) = Config::from_yaml(text) else { return };
    let _legacy = first.take_legacy();
    let valid = first.validate().is_ok();
    let yaml = first.to_yaml().expect("a parsed config renders");
    let mut second = Config::from_yaml(&yaml)
        .unwrap_or_else(|e| panic!("rendered config does not parse: {e}\n--- rendered:\n{yaml}\n--- from:\n{text}"));
    assert!(second.take_legacy().is_empty(), "legacy keys written:\n{yaml}");
    assert_eq!(first, second, "round trip changed the config\n--- rendered:\n{yaml}");
    assert_eq!(second.validate().is_ok(), valid, "validate changed its verdict\n--- rendered:\n{yaml}");
    assert_eq!(second.to_yaml().expect("renders"), yaml, "rendering is not stable");
});
