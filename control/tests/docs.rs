//! The docs stay true to the repository: `docs/api.md`'s route table is the one generated from
//! `control/openapi.json`. Needs nothing but the checkout: plain `cargo test` runs it.
//! After an API change: `UPDATE_EXPECT=1 cargo test -p partyline-control --test docs`.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

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

// ---- Files ----

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("control/ is inside the workspace").to_path_buf()
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}
