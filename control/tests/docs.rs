//! The docs stay true to the repository: `docs/api.md`'s route table is the one generated from
//! `control/openapi.json`, every relative link of every Markdown file resolves (to a file, and
//! to a heading where it names one), every Markdown file a doc names exists, and README.md stays
//! short. Needs nothing but the checkout: plain `cargo test` runs it.
//! After an API change: `UPDATE_EXPECT=1 cargo test -p partyline-control --test docs`.

use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// What a newcomer reads in ten minutes; the rest belongs in docs/.
const README_MAX_LINES: usize = 150;

const ROUTES_BEGIN: &str = "<!-- The table below is generated from control/openapi.json by control/tests/docs.rs; \
                            after an API change: UPDATE_EXPECT=1 cargo test -p partyline-control --test docs -->\n";
const ROUTES_END: &str = "<!-- end of the generated routes -->";

/// The table's order of methods: reads first, then writes, then the protocol's own.
const METHODS: [&str; 8] = ["get", "post", "put", "patch", "delete", "options", "head", "trace"];
/// What else an OpenAPI path item may hold besides operations.
const PATH_ITEM_FIELDS: [&str; 5] = ["summary", "description", "servers", "parameters", "$ref"];

#[test]
fn docs_api_md_lists_exactly_the_routes_of_openapi_json() {
    let document: Value = serde_json::from_str(&read(&repo_root().join("control/openapi.json"))).expect("valid JSON");
    let api_md = read(&repo_root().join("docs/api.md"));
    let expected = with_routes(&api_md, &route_table(&document));
    expect_test::expect_file!["../../docs/api.md"].assert_eq(&expected);
}

#[test]
fn every_relative_link_in_the_docs_resolves() {
    let root = repo_root();
    let mut broken = Vec::new();
    for file in markdown_files(&root) {
        for (line, target) in links(&read(&file)) {
            if let Err(why) = check_link(&root, &file, &target) {
                broken.push(format!("{}:{line}: ({target}): {why}", shown(&root, &file)));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn every_markdown_file_the_docs_name_exists() {
    let root = repo_root();
    let mut missing = Vec::new();
    for file in markdown_files(&root) {
        let folder = file.parent().expect("a file has a folder");
        for name in markdown_names(&read(&file)) {
            // Prose names files from the repository's root; links, from the file's folder.
            if !folder.join(&name).exists() && !root.join(&name).exists() {
                missing.push(format!("{}: {name}", shown(&root, &file)));
            }
        }
    }
    assert!(missing.is_empty(), "Markdown files named but not in the repository:\n{}", missing.join("\n"));
}

#[test]
fn readme_stays_short() {
    let lines = read(&repo_root().join("README.md")).lines().count();
    assert!(lines <= README_MAX_LINES, "README.md has {lines} lines, at most {README_MAX_LINES}: move detail to docs/");
}

#[test]
fn heading_anchors_follow_githubs_slugs() {
    let markdown = concat!(
        "# A panel's events\n",
        "## Control API: `bench/api`\n",
        "```\n# not a heading\n```\n",
        "## Scène\n",
        "## A panel's events\n",
    );
    let anchors = heading_anchors(markdown);
    let expected = ["a-panels-events", "control-api-benchapi", "scène", "a-panels-events-1"];
    assert_eq!(anchors, expected.iter().map(|anchor| anchor.to_string()).collect());
}

// ---- The route table ----

/// One row per operation of the document: method, path, its summary, who may call it.
fn route_table(document: &Value) -> String {
    let paths = document["paths"].as_object().expect("the document has paths");
    let mut sorted: Vec<_> = paths.iter().collect();
    sorted.sort_by_key(|(path, _)| path.as_str());
    let mut table = String::from("| method | path | what | who |\n|---|---|---|---|\n");
    for (path, item) in sorted {
        let item = item.as_object().expect("a path item is an object");
        // A method the table does not know must not drop out of it unnoticed.
        for key in item.keys() {
            let known = METHODS.contains(&key.as_str()) || PATH_ITEM_FIELDS.contains(&key.as_str());
            assert!(known, "{path}: unknown path item field {key:?}");
        }
        for method in METHODS {
            if let Some(operation) = item.get(method) {
                let what = table_cell(operation["summary"].as_str().unwrap_or_default());
                let who = who_may_call(operation);
                table.push_str(&format!("| {} | `{path}` | {what} | {who} |\n", method.to_uppercase()));
            }
        }
    }
    table
}

/// The security schemes an operation asks for (`admin_token` → "admin token"), or "open".
fn who_may_call(operation: &Value) -> String {
    let schemes: Vec<String> = operation["security"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
        .flat_map(|requirement| requirement.keys().map(|name| name.replace('_', " ")))
        .collect();
    if schemes.is_empty() { "open".to_owned() } else { schemes.join(", ") }
}

/// A summary as one table cell: one line, rustdoc's `[`Type`]` links as plain code, pipes escaped.
fn table_cell(summary: &str) -> String {
    summary.split_whitespace().collect::<Vec<_>>().join(" ").replace("[`", "`").replace("`]", "`").replace('|', "\\|")
}

/// `docs/api.md` with the table between its markers replaced.
fn with_routes(api_md: &str, table: &str) -> String {
    let (head, rest) = api_md.split_once(ROUTES_BEGIN).expect("docs/api.md has the routes' begin marker");
    let (_, tail) = rest.split_once(ROUTES_END).expect("docs/api.md has the routes' end marker");
    format!("{head}{ROUTES_BEGIN}{table}{ROUTES_END}{tail}")
}

// ---- Markdown ----

/// Every Markdown file of the checkout. A walk, not `git ls-files`: `scripts/test` runs the tests
/// as root, for whom git refuses a checkout another user owns. Build output, npm's packages and
/// hidden folders (git's own, `.run/`) are not the repository's docs.
fn markdown_files(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut folders = vec![root.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in fs::read_dir(&folder).expect("readable folder") {
            let path = entry.expect("readable entry").path();
            let name = path.file_name().expect("an entry has a name").to_string_lossy();
            if path.is_dir() {
                if !(name.starts_with('.') || name == "target" || name == "node_modules") {
                    folders.push(path);
                }
            } else if name.ends_with(".md") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// The destinations of a file's inline links and images, and of its link definitions, with
/// their line numbers; code is not prose, so its brackets are not links.
fn links(markdown: &str) -> Vec<(usize, String)> {
    let prose = without_code_spans(&without_fences(markdown));
    let mut found = Vec::new();
    for (start, _) in prose.match_indices("](") {
        let destination = &prose[start + 2..];
        let end = closing_paren(destination).unwrap_or(destination.len());
        found.push((line_of(&prose, start), link_target(&destination[..end])));
    }
    for (index, line) in prose.lines().enumerate() {
        if let Some((label, destination)) = line.trim_start().split_once("]: ")
            && label.starts_with('[')
            && !label.contains("](")
        {
            found.push((index + 1, link_target(destination)));
        }
    }
    found
}

/// Where a link's destination ends: the parenthesis that closes it (destinations may nest them).
fn closing_paren(destination: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (index, character) in destination.char_indices() {
        match character {
            '(' => depth += 1,
            ')' if depth == 0 => return Some(index),
            ')' => depth -= 1,
            _ => {}
        }
    }
    None
}

/// A destination without its angle brackets or its title.
fn link_target(destination: &str) -> String {
    let destination = destination.trim();
    match destination.strip_prefix('<') {
        Some(bracketed) => bracketed.split('>').next().unwrap_or_default().to_owned(),
        None => destination.split_whitespace().next().unwrap_or_default().to_owned(),
    }
}

/// A link resolves when its file exists and, for a Markdown file and an anchor, a heading has
/// that anchor. Links leaving the repository are not checked: the tests run offline.
fn check_link(root: &Path, file: &Path, target: &str) -> Result<(), String> {
    if target.contains("://") || target.starts_with("mailto:") {
        return Ok(());
    }
    let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
    let resolved = match path {
        "" => file.to_path_buf(),
        _ if path.starts_with('/') => root.join(path.trim_start_matches('/')),
        _ => file.parent().expect("a file has a folder").join(path),
    };
    if !resolved.exists() {
        return Err("no such file".to_owned());
    }
    let is_markdown = resolved.extension().is_some_and(|extension| extension == "md");
    if anchor.is_empty() || !is_markdown || heading_anchors(&read(&resolved)).contains(anchor) {
        Ok(())
    } else {
        Err(format!("no heading with the anchor #{anchor}"))
    }
}

/// The anchors GitHub gives a file's headings: lower case, only letters, digits, `-`, `_` and
/// spaces kept, spaces as `-`; a repeated anchor gets `-1`, `-2`, … in order.
fn heading_anchors(markdown: &str) -> BTreeSet<String> {
    let mut times_seen: HashMap<String, usize> = HashMap::new();
    let mut anchors = BTreeSet::new();
    for heading in without_fences(markdown).lines().filter_map(heading_text) {
        let slug: String = heading
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let seen = times_seen.entry(slug.clone()).or_default();
        anchors.insert(if *seen == 0 { slug } else { format!("{slug}-{seen}") });
        *seen += 1;
    }
    anchors
}

/// An ATX heading's text (`## Text ##` → `Text`).
fn heading_text(line: &str) -> Option<&str> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    let hashes = line[indent..].len() - line[indent..].trim_start_matches('#').len();
    let rest = &line[indent + hashes..];
    let is_heading = indent <= 3 && (1..=6).contains(&hashes) && (rest.is_empty() || rest.starts_with([' ', '\t']));
    is_heading.then(|| rest.trim().trim_end_matches('#').trim_end())
}

/// The text with every fenced code block's lines emptied (line numbers kept).
fn without_fences(markdown: &str) -> String {
    let mut open_fence: Option<String> = None;
    let mut kept = String::with_capacity(markdown.len());
    for line in markdown.lines() {
        match (open_fence.take(), fence(line)) {
            (Some(open), Some((marker, rest))) if marker.starts_with(&open) && rest.trim().is_empty() => {}
            (Some(open), _) => open_fence = Some(open),
            (None, Some((marker, _))) => open_fence = Some(marker.to_owned()),
            (None, None) => kept.push_str(line),
        }
        kept.push('\n');
    }
    kept
}

/// A fence line's marker (three or more backticks or tildes) and what follows it.
fn fence(line: &str) -> Option<(&str, &str)> {
    let trimmed = line.trim_start();
    let first = trimmed.chars().next().filter(|c| matches!(c, '`' | '~'))?;
    let length = trimmed.len() - trimmed.trim_start_matches(first).len();
    (length >= 3).then(|| trimmed.split_at(length))
}

/// The text with every inline code span blanked out (line breaks kept): a span opens with a run
/// of backticks and closes with the next run of the same length, across lines too.
fn without_code_spans(text: &str) -> String {
    let mut bytes = text.as_bytes().to_vec();
    let mut index = 0;
    while index < bytes.len() {
        let run = backtick_run(&bytes, index);
        if run == 0 {
            index += 1;
            continue;
        }
        let close = (index + run..bytes.len()).find(|&at| backtick_run(&bytes, at) == run && bytes[at - 1] != b'`');
        let Some(close) = close else {
            index += run;
            continue;
        };
        // Only whole spans between ASCII backticks are blanked, so the text stays valid UTF-8.
        for byte in &mut bytes[index..close + run] {
            if *byte != b'\n' {
                *byte = b' ';
            }
        }
        index = close + run;
    }
    String::from_utf8(bytes).expect("blanking whole spans keeps UTF-8")
}

fn backtick_run(bytes: &[u8], at: usize) -> usize {
    bytes[at..].iter().take_while(|&&byte| byte == b'`').count()
}

/// The Markdown files a text names (`bridged/README.md`, `../BENCHMARKS.md`), links or not;
/// addresses and absolute paths (installed files) are not the repository's.
fn markdown_names(markdown: &str) -> BTreeSet<String> {
    let is_name_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/' | '-');
    markdown
        .split(|c: char| !is_name_char(c))
        .map(|word| word.trim_end_matches('.'))
        .filter(|word| word.len() > 3 && word.ends_with(".md") && !word.starts_with('/'))
        .filter(|word| word.as_bytes()[word.len() - 4].is_ascii_alphanumeric())
        .map(str::to_owned)
        .collect()
}

// ---- Files ----

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("control/ is inside the workspace").to_path_buf()
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

fn shown(root: &Path, file: &Path) -> String {
    file.strip_prefix(root).unwrap_or(file).display().to_string()
}

fn line_of(text: &str, byte: usize) -> usize {
    text[..byte].matches('\n').count() + 1
}
