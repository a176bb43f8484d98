//! Architecture invariants that a test can hold (ARCHITECTURE.md lists them all).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// Package name → the names of everything it depends on at run time, transitively.
fn runtime_closure(package: &str) -> BTreeSet<String> {
    // Only this platform's packages: they are all downloaded (the tests may run offline).
    let rustc = std::process::Command::new("rustc").arg("-vV").output().expect("rustc -vV");
    let rustc = String::from_utf8_lossy(&rustc.stdout);
    let host = rustc.lines().find_map(|l| l.strip_prefix("host: ")).expect("host triple");
    let output = std::process::Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--locked", "--offline", "--filter-platform", host])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let metadata: Value = serde_json::from_slice(&output.stdout).expect("metadata JSON");
    let names: BTreeMap<&str, &str> = metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|p| (p["id"].as_str().expect("id"), p["name"].as_str().expect("name")))
        .collect();
    let nodes: BTreeMap<&str, Vec<&str>> = metadata["resolve"]["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .map(|n| {
            let normal = n["deps"]
                .as_array()
                .expect("deps")
                .iter()
                .filter(|d| d["dep_kinds"].as_array().expect("kinds").iter().any(|k| k["kind"].is_null()));
            (n["id"].as_str().expect("id"), normal.map(|d| d["pkg"].as_str().expect("pkg")).collect())
        })
        .collect();
    let root = names.iter().find(|(_, name)| **name == package).map(|(id, _)| *id).expect("package in workspace");
    let mut seen = BTreeSet::new();
    let mut stack = vec![root];
    while let Some(id) = stack.pop() {
        for dep in nodes.get(id).into_iter().flatten() {
            if seen.insert(names[dep].to_owned()) {
                stack.push(dep);
            }
        }
    }
    seen
}

fn offending<'a>(closure: &'a BTreeSet<String>, prefixes: &[&str]) -> Vec<&'a String> {
    closure.iter().filter(|name| prefixes.iter().any(|p| name.starts_with(p))).collect()
}

#[test]
fn shared_links_neither_gstreamer_nor_axum() {
    let closure = runtime_closure("partyline-shared");
    assert_eq!(offending(&closure, &["gstreamer", "glib", "axum"]), Vec::<&String>::new());
}

#[test]
fn control_never_links_gstreamer() {
    let closure = runtime_closure("partyline-control");
    assert!(closure.contains("axum"), "the closure is computed: {closure:?}");
    assert_eq!(offending(&closure, &["gstreamer", "glib"]), Vec::<&String>::new());
}
