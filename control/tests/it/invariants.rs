//! Architecture invariants that a test can hold (ARCHITECTURE.md lists them all).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

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

/// A crate's top-level module → the crate's other top-level modules its code names
/// (`crate::x…`, also inside `use crate::{…}`), its unit tests aside.
fn module_imports(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in rust_files(src) {
        let relative = file.strip_prefix(src).expect("under src");
        let module = relative.iter().next().expect("a path").to_string_lossy().trim_end_matches(".rs").to_owned();
        let text = std::fs::read_to_string(&file).expect("read a source file");
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or_default();
        let code: String = code.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n");
        let named = graph.entry(module.clone()).or_default();
        for (_, rest) in code.match_indices("crate::").map(|(at, _)| ((), &code[at + "crate::".len()..])) {
            named.extend(first_segments(rest).into_iter().filter(|name| *name != module));
        }
    }
    graph
}

/// The first path segment after `crate::`, or each one inside `{…}`.
fn first_segments(rest: &str) -> Vec<String> {
    let ident = |s: &str| s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect::<String>();
    let Some(group) = rest.strip_prefix('{') else { return vec![ident(rest)] };
    let (mut depth, mut segments, mut start) = (0, Vec::new(), true);
    for (at, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => start = true,
            c if start && !c.is_whitespace() => {
                segments.push(ident(&group[at..]));
                start = false;
            }
            _ => {}
        }
    }
    segments.into_iter().filter(|s| !s.is_empty() && s != "self").collect()
}

fn rust_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read a source directory") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

/// The modules on a circle of imports, one circle per entry (empty: the graph is layered).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let mut found = BTreeSet::new();
    for start in graph.keys() {
        // Depth-first from `start`, back to `start`: each circle is found from its smallest module.
        let mut stack = vec![vec![start.clone()]];
        while let Some(path) = stack.pop() {
            for next in graph.get(path.last().expect("non-empty")).into_iter().flatten() {
                if next == start {
                    found.insert(path.clone());
                } else if next > start && !path.contains(next) {
                    stack.push([path.clone(), vec![next.clone()]].concat());
                }
            }
        }
    }
    found.into_iter().collect()
}

/// The workspace's crates, as the root `Cargo.toml` lists them (a new crate is held to the
/// invariants below without anyone adding it here).
fn workspace_crates(root: &Path) -> Vec<String> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("the workspace's Cargo.toml");
    let members = manifest.split_once("members = [").and_then(|(_, rest)| rest.split_once(']')).expect("members");
    let crates: Vec<String> = members.0.split(',').map(|m| m.trim().trim_matches('"').to_owned()).collect();
    assert!(crates.len() >= 6 && crates.iter().all(|c| root.join(c).join("src").is_dir()), "{crates:?}");
    crates
}

/// Layering: no module of any crate imports one that imports it back, directly or around a
/// circle (each can be read, and changed, knowing only the modules below it).
#[test]
fn no_crate_has_modules_that_import_each_other_in_a_circle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut imports = 0;
    for crate_dir in workspace_crates(&root) {
        let graph = module_imports(&root.join(&crate_dir).join("src"));
        imports += graph.values().map(BTreeSet::len).sum::<usize>();
        assert_eq!(circles(&graph), Vec::<Vec<String>>::new(), "{crate_dir}: modules importing each other in a circle");
    }
    assert!(imports > 100, "the imports are read ({imports})");
}

/// Lines of a source file before its unit tests (`#[cfg(test)] mod tests`).
fn lines_before_tests(text: &str) -> usize {
    text.split("#[cfg(test)]\nmod tests").next().unwrap_or_default().lines().count()
}

/// Readable in one sitting: no source file of any crate is over 400 lines before its unit
/// tests. A file that grows past it has taken a second job, which goes into a file of its own.
#[test]
fn no_source_file_is_over_400_lines_before_its_tests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut read = 0;
    let mut long = Vec::new();
    for crate_dir in workspace_crates(&root) {
        for file in rust_files(&root.join(crate_dir).join("src")) {
            let lines = lines_before_tests(&std::fs::read_to_string(&file).expect("read a source file"));
            read += 1;
            if lines > 400 {
                long.push(format!("{}: {lines}", file.strip_prefix(&root).unwrap_or(&file).display()));
            }
        }
    }
    assert!(read > 100, "the sources are read ({read} files)");
    assert_eq!(long, Vec::<String>::new(), "files over 400 lines before their tests");
}

/// `/proc` is read through `procfs`: no Rust file of any crate (sources, tests, examples) opens
/// a file or directory under it by hand (each hand-written parser of its lines had its own
/// field offsets to get right).
#[test]
fn proc_is_read_through_procfs_only() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut read = 0;
    let mut by_hand = Vec::new();
    for crate_dir in workspace_crates(&root) {
        let dirs = ["src", "tests", "examples"].map(|dir| root.join(&crate_dir).join(dir));
        for file in dirs.iter().filter(|dir| dir.is_dir()).flat_map(|dir| rust_files(dir)) {
            let text = std::fs::read_to_string(&file).expect("read a source file");
            read += 1;
            let opens = |line: &&str| ["read_to_string(", "read_dir(", "File::open("].iter().any(|f| line.contains(f));
            for line in text.lines().filter(|line| line.contains("\"/proc")).filter(opens) {
                by_hand.push(format!("{}: {}", file.strip_prefix(&root).unwrap_or(&file).display(), line.trim()));
            }
        }
    }
    assert!(read > 100, "the sources are read ({read} files)");
    assert_eq!(by_hand, Vec::<String>::new(), "/proc read by hand");
}
