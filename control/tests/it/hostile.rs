//! Hostile input to every route of the OpenAPI document (read from
//! `partyline_control::api::openapi()`, so a new route is covered without touching this file):
//! unicode (RTL, zero-width, combining marks, emoji, NUL, control characters), oversize and
//! deeply nested bodies, numbers out of range and of the wrong kind, wrong types, path
//! traversal and oversize ids, odd content types and credentials, with and without the admin
//! token; then raw HTTP/1.1 that no well-behaved client sends (CR/LF injection, duplicate
//! `Content-Length`, request smuggling shapes), over a plain socket.
//!
//! What is asserted, request by request:
//! - never a 5xx, except `503 unavailable` from an operation that documents 503, for the
//!   dependency this test leaves out on purpose (Janus, partyline-bridged);
//! - every 4xx/5xx answered by the application has the body `{"error": "…", "code": "…"}` and
//!   nothing else (hyper's own protocol-level refusals, on the raw socket only, have an empty
//!   body: a response with a body is the JSON error);
//! - without the admin token, every `/api/admin` request answers 401 `unauthorized`, whatever
//!   else is wrong with it;
//! - a refused request (any 4xx/5xx) and any read leave the config file byte-identical;
//! - a write the API accepts (a weird but valid name is valid by design) leaves a file that
//!   parses and validates; the test then restores the original text (SIGHUP) before going on.
//!
//! After each operation's corpus, `GET /admin/config` still shows the original config; at the
//! end the process is alive and logged no panic.

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HOST, HeaderName, HeaderValue};
use reqwest::{Method, StatusCode};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{Control, LOOPBACK_PLAIN, http, parse_config, wait_for};

/// The config every probe starts from (and is restored to after an accepted write).
const SEED: &str = "groups:\n  - name: Stage Left\n    audioBitrate: 96\n  - name: FOH\naudio:\n  defaultBitrate: 64\n  \
                    channelNames:\n    inputs:\n      \"0\": Stage mic\n";

/// JSON values (as raw text: some are not representable as `serde_json::Value`) put in every
/// field of every request body.
fn hostile_values() -> Vec<String> {
    let strings: Vec<String> = [
        "",
        " ",
        "\u{202E}tfeL egatS",
        "Stage\u{202E}Left",
        "\u{200B}",
        "Stage\u{200B}Left\u{200D}",
        "\u{FEFF}Stage",
        "e\u{301}\u{302}\u{303}\u{304}\u{305}\u{306}\u{307}\u{308}",
        "Z\u{336}\u{337}\u{338}a\u{34F}\u{35C}lgo",
        "🎤",
        "👩\u{200D}👩\u{200D}👧\u{200D}👦 crew",
        "\0",
        "a\0b",
        "\u{1}\u{1f}\u{7f}",
        "\u{85}\u{9B}",
        "line\nbreak",
        "\r\nX-Injected: 1",
        "\t",
        "\u{2028}\u{2029}",
        "\u{FFFD}",
        "\u{10FFFF}",
        "\u{E000}",
        "שלום עולם",
        "مرحبا",
        "İstanbul",
        "Straße",
        "ﬁ Ⅻ ㎒",
        "../../etc/passwd",
        "..\\..\\windows",
        "/etc/passwd",
        "%00",
        "%2e%2e%2f",
        "${jndi:ldap://x/a}",
        "<script>alert(1)</script>",
        "' OR 1=1 --",
        "{{7*7}}",
        "\\",
        "\"",
        "Stage Left",
        "STAGE   LEFT",
        "stage-left",
        "- item",
        "&anchor",
        "*alias",
        "!!python/object/apply:os.system ['true']",
        "~",
        "null",
        "yes",
        ": colon",
        "# comment",
        "key: value\nother: 1",
        "---\n...",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .chain(["a".repeat(65), "é".repeat(64), "é".repeat(65), "a".repeat(20_000), "\u{301}".repeat(10_000)])
    .map(|s| serde_json::to_string(&s).expect("string encodes"))
    .collect();
    let others = [
        r#""\ud800""#,
        r#""\udfff\ud800""#,
        r#""\u0000""#,
        "-1",
        "0",
        "-0",
        "1.5",
        "1e2",
        "256",
        "4294967297",
        "9007199254740993",
        "18446744073709551616",
        "-18446744073709551617",
        "1e309",
        "-1e309",
        "0.0000000000000000000000000001",
        "null",
        "true",
        "[]",
        "{}",
        "[1,2]",
        r#"{"0":"x"}"#,
        r#"{"name":{"name":{"name":[]}}}"#,
    ];
    strings.into_iter().chain(others.iter().map(|s| (*s).to_owned())).collect()
}

/// Whole bodies that are not what any route expects.
fn hostile_bodies() -> Vec<(String, Vec<u8>)> {
    let mut bodies: Vec<(String, Vec<u8>)> = [
        ("empty", ""),
        ("null", "null"),
        ("array", "[]"),
        ("string", "\"x\""),
        ("number", "1"),
        ("truncated", "{\"name\":"),
        ("open brace", "{"),
        ("trailing garbage", "{} x"),
        ("two documents", "{} {}"),
        ("BOM", "\u{FEFF}{}"),
        ("NaN", "{\"name\":NaN}"),
        ("Infinity", "{\"name\":Infinity}"),
        ("single quotes", "{'name':'x'}"),
        ("comment", "{/* c */}"),
        ("unknown field", "{\"zzz\":1}"),
        ("id field", "{\"id\":\"x\",\"name\":\"Fresh\"}"),
        ("duplicate keys", "{\"name\":\"A\",\"name\":\"B\"}"),
        ("__proto__", "{\"__proto__\":{\"admin\":true}}"),
    ]
    .iter()
    .map(|(label, body)| ((*label).to_owned(), body.as_bytes().to_vec()))
    .collect();
    bodies.push(("invalid UTF-8".into(), b"{\"name\":\"\xff\xfe\xc0\xaf\"}".to_vec()));
    bodies.push(("raw NUL".into(), b"{\"name\":\"a\x00b\"}".to_vec()));
    bodies.push(("10,000 nested arrays".into(), format!("{}{}", "[".repeat(10_000), "]".repeat(10_000)).into()));
    let objects = format!("{}1{}", "{\"a\":".repeat(10_000), "}".repeat(10_000));
    bodies.push(("10,000 nested objects".into(), objects.into()));
    bodies.push(("unclosed nesting".into(), "[".repeat(60_000).into()));
    bodies.push(("100,000 nested arrays (over the limit)".into(), "[".repeat(100_000).into()));
    bodies.push(("1 MB string".into(), format!("{{\"name\":\"{}\"}}", "a".repeat(1 << 20)).into()));
    let keys: Vec<String> = (0..4_000).map(|i| format!("\"k{i}\":{i}")).collect();
    bodies.push(("4,000 keys".into(), format!("{{{}}}", keys.join(",")).into()));
    bodies
}

/// Path ids, percent-encoded as they go on the wire. (reqwest's URL parser removes dot
/// segments, `..` and `%2e%2e` included: the raw-socket probes send those unnormalised.)
fn hostile_ids() -> Vec<String> {
    [
        "..%2F..%2Fetc%2Fpasswd",
        "..%2f..%2f..%2fetc%2fshadow",
        "%2e%2e%2fpartyline.yaml",
        "..%5C..%5Cpartyline.yaml",
        "%00",
        "stage-left%00",
        "%FF",
        "%C0%AE%C0%AE%C0%AF",
        "%",
        "%zz",
        "%25",
        "%E2%80%AEtfel-egats",
        "stage-left%0D%0AX-Injected:%201",
        "%20",
        "%09",
        "%F0%9F%8E%A4",
        "e%CC%81%CC%81",
        "STAGE-LEFT",
        "stage-left%2F",
        "stage-left;drop",
        "stage-left%3Fx=1",
        "%7B%7D",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .chain(["x".repeat(8_000)])
    .collect()
}

/// Query values (percent-encoded), for every query parameter.
fn hostile_query_values() -> Vec<String> {
    [
        "",
        "-1",
        "0",
        "1.5",
        "1e309",
        "18446744073709551616",
        "%00",
        "%FF",
        "%",
        "%zz",
        "WARN",
        "warn%00",
        "%E2%80%AE",
        "[]",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .chain(["9".repeat(5_000)])
    .collect()
}

/// Whole query strings, for every GET.
const HOSTILE_QUERIES: &[&str] = &[
    "unknown=1",
    "%FF=%FF",
    "level=warn&level=error",
    "limit=1&limit=2",
    "&&&",
    "=",
    "level",
    "limit[]=1",
    "level=warn%0D%0AX-Injected:%201",
];

const CONTENT_TYPES: &[&[u8]] = &[
    b"text/plain",
    b"application/json; charset=utf-16",
    b"application/x-www-form-urlencoded",
    b"multipart/form-data; boundary=x",
    b"application/jsonx",
    b"APPLICATION/JSON",
    b"application/json, text/html",
    b"*/*",
    b"application/vnd.partyline+json",
    b"application/json\xff",
    b"",
];

/// One operation of the OpenAPI document.
#[derive(Debug)]
struct Operation {
    method: Method,
    /// The templated path, e.g. `/api/admin/groups/{id}`.
    path: String,
    path_params: Vec<String>,
    query_params: Vec<String>,
    body: Option<BodyShape>,
    /// Served on the loopback events listener.
    internal: bool,
    documents_503: bool,
    /// Answers with an event stream that does not end: only its status and type are read.
    streaming: bool,
    /// Its success is JSON (or has no body), as its document says: `/metrics` answers text.
    answers_json: bool,
    /// It needs the admin token, as its document says.
    admin: bool,
}

impl Operation {
    fn is_admin(&self) -> bool {
        self.admin
    }

    fn label(&self) -> String {
        format!("{} {}", self.method, self.path)
    }

    /// The path with its parameters: an id that exists where the route has one.
    fn known_path(&self) -> String {
        let known = if self.path.contains("/groups/") { "stage-left" } else { "nobody" };
        self.path_with(known)
    }

    fn path_with(&self, value: &str) -> String {
        self.path_params.iter().fold(self.path.clone(), |path, name| path.replace(&format!("{{{name}}}"), value))
    }
}

/// A request body's schema, as far as the corpus needs it.
#[derive(Debug)]
enum BodyShape {
    /// A JSON object: its required fields (with a valid example value) and every field.
    Object {
        base: BTreeMap<String, String>,
        fields: Vec<Field>,
    },
    Array,
}

#[derive(Debug)]
struct Field {
    name: String,
    /// A map of names (the channel names): hostile values also go inside it, as key and value.
    map: bool,
}

impl BodyShape {
    /// The body with `field` set to the raw JSON `value`, other required fields valid.
    fn with(base: &BTreeMap<String, String>, field: &str, value: &str) -> Vec<u8> {
        let mut entries = base.clone();
        entries.insert(field.to_owned(), value.to_owned());
        let members: Vec<String> = entries.iter().map(|(k, v)| format!("{}:{v}", Value::from(k.as_str()))).collect();
        format!("{{{}}}", members.join(",")).into_bytes()
    }

    fn base(&self) -> Vec<u8> {
        match self {
            BodyShape::Object { base, .. } => {
                let members: Vec<String> =
                    base.iter().map(|(k, v)| format!("{}:{v}", Value::from(k.as_str()))).collect();
                format!("{{{}}}", members.join(",")).into_bytes()
            }
            BodyShape::Array => b"[]".to_vec(),
        }
    }

    /// Every body of the field-by-field corpus.
    fn corpus(&self) -> Vec<(String, Vec<u8>)> {
        let values = hostile_values();
        let mut bodies = Vec::new();
        match self {
            BodyShape::Object { base, fields } => {
                for field in fields {
                    for value in &values {
                        let label = format!("{}={}", field.name, abbreviate(value));
                        bodies.push((label, Self::with(base, &field.name, value)));
                        if field.map {
                            let inside = format!("{{\"0\":{value}}}");
                            bodies.push((
                                format!("{}.0={}", field.name, abbreviate(value)),
                                Self::with(base, &field.name, &inside),
                            ));
                            if value.starts_with('"') {
                                let key = format!("{{{value}:\"x\"}}");
                                let label = format!("{}[{}]", field.name, abbreviate(value));
                                bodies.push((label, Self::with(base, &field.name, &key)));
                            }
                        }
                    }
                }
            }
            BodyShape::Array => {
                for value in &values {
                    bodies.push((format!("[{}]", abbreviate(value)), format!("[{value}]").into_bytes()));
                }
            }
        }
        bodies
    }
}

fn abbreviate(text: &str) -> String {
    if text.chars().count() <= 40 {
        text.to_owned()
    } else {
        format!("{}… ({} bytes)", text.chars().take(30).collect::<String>(), text.len())
    }
}

/// Reads the operations from the OpenAPI document.
fn operations() -> Vec<Operation> {
    let document = serde_json::to_value(partyline_control::api::openapi()).expect("document renders");
    let resolve = |schema: &Value| -> Value {
        match schema["$ref"].as_str().and_then(|r| r.strip_prefix("#/components/schemas/")) {
            Some(name) => document["components"]["schemas"][name].clone(),
            None => schema.clone(),
        }
    };
    let mut operations = Vec::new();
    for (path, item) in document["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("path item") {
            let Ok(method) = Method::from_bytes(method.to_uppercase().as_bytes()) else { continue };
            let parameters = operation["parameters"].as_array().cloned().unwrap_or_default();
            let names_in = |place: &str| -> Vec<String> {
                parameters
                    .iter()
                    .filter(|p| p["in"] == place)
                    .map(|p| p["name"].as_str().expect("name").to_owned())
                    .collect()
            };
            let schema = resolve(&operation["requestBody"]["content"]["application/json"]["schema"]);
            let body = if schema.is_null() {
                None
            } else if schema["type"] == "array" {
                Some(BodyShape::Array)
            } else {
                let properties = schema["properties"].as_object().cloned().unwrap_or_default();
                let required: Vec<&str> = schema["required"]
                    .as_array()
                    .map(|r| r.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let base = required.iter().map(|name| ((*name).to_owned(), example_of(&properties[*name]))).collect();
                let fields = properties
                    .iter()
                    .map(|(name, p)| Field { name: name.clone(), map: p.get("additionalProperties").is_some() })
                    .collect();
                Some(BodyShape::Object { base, fields })
            };
            let tags = operation["tags"].as_array().cloned().unwrap_or_default();
            operations.push(Operation {
                method,
                path: path.clone(),
                path_params: names_in("path"),
                query_params: names_in("query"),
                body,
                internal: tags.iter().any(|t| t == "internal"),
                documents_503: operation["responses"].get("503").is_some(),
                streaming: operation["responses"]["200"]["content"].get("text/event-stream").is_some(),
                answers_json: operation["responses"]["200"]["content"]
                    .as_object()
                    .is_none_or(|content| content.contains_key("application/json")),
                admin: operation["security"].as_array().is_some_and(|s| !s.is_empty()),
            });
        }
    }
    operations
}

/// A valid value for a required field: its example, else its minimum, else a short string.
fn example_of(property: &Value) -> String {
    if let Some(example) = property.get("example") {
        return example.to_string();
    }
    let types = property["type"].to_string();
    if types.contains("integer") || types.contains("number") {
        return property.get("minimum").map_or_else(|| "0".to_owned(), Value::to_string);
    }
    "\"x\"".to_owned()
}

#[derive(Debug, Clone)]
enum Auth {
    Admin,
    Without,
    /// An `Authorization` header that is not the admin token.
    Wrong(HeaderValue),
}

#[derive(Debug)]
struct Probe {
    label: String,
    path: String,
    query: Option<String>,
    body: Option<Vec<u8>>,
    /// `None` with a body: `application/json`. `Some(None)`: no content type at all.
    content_type: Option<Option<HeaderValue>>,
    auth: Auth,
    headers: Vec<(HeaderName, HeaderValue)>,
}

impl Probe {
    fn new(label: impl Into<String>, path: String) -> Self {
        Self {
            label: label.into(),
            path,
            query: None,
            body: None,
            content_type: None,
            auth: Auth::Admin,
            headers: Vec::new(),
        }
    }

    fn body(mut self, body: Vec<u8>) -> Self {
        self.body = Some(body);
        self
    }

    fn query(mut self, query: String) -> Self {
        self.query = Some(query);
        self
    }

    fn auth(mut self, auth: Auth) -> Self {
        self.auth = auth;
        self
    }
}

/// The run: sends probes, checks each answer, restores the config after accepted writes.
struct Run<'a> {
    control: &'a Control,
    client: reqwest::Client,
    original_text: String,
    original_view: Value,
    /// The file's text before the next probe (differs from the original after an accepted
    /// write, until the next restore).
    text: String,
    statuses: BTreeMap<u16, usize>,
    accepted: Vec<String>,
    violations: Vec<String>,
}

impl Run<'_> {
    fn violation(&mut self, what: &str, problem: &str) {
        self.violations.push(format!("{what:.300}: {problem:.500}"));
    }

    async fn send(&mut self, operation: &Operation, probe: Probe) {
        let origin = if operation.internal { &self.control.events_origin } else { &self.control.origin };
        let mut url = format!("{origin}{}", probe.path);
        if let Some(query) = &probe.query {
            url = format!("{url}?{query}");
        }
        let mut request = self.client.request(operation.method.clone(), &url);
        request = match &probe.auth {
            Auth::Admin => request.bearer_auth(&self.control.token),
            Auth::Without => request,
            Auth::Wrong(value) => request.header(AUTHORIZATION, value.clone()),
        };
        if let Some(body) = &probe.body {
            match &probe.content_type {
                None => request = request.header(CONTENT_TYPE, "application/json"),
                Some(Some(value)) => request = request.header(CONTENT_TYPE, value.clone()),
                Some(None) => {}
            }
            request = request.body(body.clone());
        }
        for (name, value) in &probe.headers {
            request = request.header(name.clone(), value.clone());
        }
        let what = format!("{} {url:.200} [{}]", operation.method, probe.label);
        let oversize = probe.body.as_ref().is_some_and(|b| b.len() > partyline_control::api::BODY_LIMIT);
        let answer = match request.send().await {
            Ok(response) if operation.streaming && response.status().is_success() => {
                let stream = response.headers().get(CONTENT_TYPE).is_some_and(|t| t == "text/event-stream");
                // `{}` stands for the stream: the checks below see a well-formed answer.
                Ok((response.status(), if stream { "{}".to_owned() } else { "not an event stream".to_owned() }))
            }
            Ok(response) => {
                let status = response.status();
                response.text().await.map(|text| (status, text))
            }
            Err(e) => Err(e),
        };
        let (status, text) = match answer {
            Ok(answer) => answer,
            // The server may answer (413, or a GET that ignores its body) and close before
            // the client has sent the whole of an oversize body: the client then reports a
            // write error instead of the answer.
            Err(_) if oversize => {
                *self.statuses.entry(0).or_default() += 1;
                self.check_file_unchanged(&what, "(connection closed while sending)");
                return;
            }
            Err(e) => return self.violation(&what, &format!("no answer: {e:?}")),
        };
        *self.statuses.entry(status.as_u16()).or_default() += 1;

        let unavailable = status == StatusCode::SERVICE_UNAVAILABLE && operation.documents_503;
        if status.is_server_error() && !unavailable {
            self.violation(&what, &format!("{status} {text}"));
        }
        if status.is_client_error() || status.is_server_error() {
            match error_body(&text) {
                None => self.violation(&what, &format!("{status} without the JSON error body: {text:?}")),
                Some(body) if unavailable && body["code"] != "unavailable" => {
                    self.violation(&what, &format!("{status} {text}"));
                }
                Some(_) => {}
            }
        } else if status != StatusCode::NO_CONTENT
            && operation.answers_json
            && serde_json::from_str::<Value>(&text).is_err()
        {
            self.violation(&what, &format!("{status} with a body that is not JSON: {text:.200}"));
        }
        if !matches!(probe.auth, Auth::Admin) && operation.is_admin() && status != StatusCode::UNAUTHORIZED {
            self.violation(&what, &format!("no valid token, yet {status} {text}"));
        }

        if status.is_success() && operation.method != Method::GET {
            let now = self.control.config_text();
            if now != self.text {
                match parse_config(&now).validate() {
                    Ok(()) => self.accepted.push(what),
                    Err(e) => self.violation(&what, &format!("accepted, and left an invalid config: {e}\n{now}")),
                }
                self.text = now;
                // Where the route names an id, the next probes need the original ids.
                if !operation.path_params.is_empty() {
                    self.restore().await;
                }
            }
        } else {
            self.check_file_unchanged(&what, &format!("{status} {text}"));
        }
    }

    fn check_file_unchanged(&mut self, what: &str, answer: &str) {
        let now = self.control.config_text();
        if now != self.text {
            self.violation(what, &format!("{answer}: refused, yet the config file changed:\n{now}"));
            self.text = now;
        }
    }

    /// Puts the original text back (atomically, as an editor would) and reloads (SIGHUP).
    async fn restore(&mut self) {
        if self.text == self.original_text {
            return;
        }
        let path = self.control.config_path();
        let temp = path.with_extension("restore");
        std::fs::write(&temp, &self.original_text).expect("write");
        std::fs::rename(&temp, path).expect("rename");
        self.control.signal("HUP");
        wait_for("the original config in force again", Duration::from_secs(10), async || {
            (self.view().await == self.original_view).then_some(())
        })
        .await;
        self.text.clone_from(&self.original_text);
    }

    async fn view(&self) -> Value {
        let (status, body) = self.control.get_json("/admin/config").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body
    }

    /// After an operation's corpus: back to the original, which memory holds.
    async fn finish(&mut self, operation: &str) {
        self.restore().await;
        assert_eq!(self.view().await, self.original_view, "after {operation}: the config in force changed");
    }
}

/// The JSON error body, if `text` is exactly `{"error": non-empty, "code": snake_case}`.
fn error_body(text: &str) -> Option<Value> {
    let body: Value = serde_json::from_str(text).ok()?;
    let object = body.as_object()?;
    let error = object.get("error")?.as_str()?;
    let code = object.get("code")?.as_str()?;
    let well_formed = object.len() == 2
        && !error.is_empty()
        && !code.is_empty()
        && code.chars().all(|c| c.is_ascii_lowercase() || c == '_');
    well_formed.then_some(body)
}

#[tokio::test]
async fn hostile_input_to_every_route_changes_nothing_and_never_fails() {
    let started = std::time::Instant::now();
    let control = Control::builder()
        .config(Some(&format!("{LOOPBACK_PLAIN}{SEED}")))
        .env("PARTYLINE_BUS", "unix:path=/nonexistent/partyline-test-bus")
        .start()
        .await;
    let original_text = control.config_text();
    let (_, original_view) = control.get_json("/admin/config").await;
    let mut run = Run {
        control: &control,
        client: fresh_connections(),
        text: original_text.clone(),
        original_text,
        original_view,
        statuses: BTreeMap::new(),
        accepted: Vec::new(),
        violations: Vec::new(),
    };
    let operations = operations();
    assert!(operations.len() >= 20, "the document lists every operation: {}", operations.len());
    let bodies = hostile_bodies();

    for operation in &operations {
        let path = operation.known_path();
        // Whole bodies, with and without the token (a GET ignores its body: still no 5xx).
        for (label, body) in &bodies {
            run.send(operation, Probe::new(label.clone(), path.clone()).body(body.clone())).await;
            if operation.is_admin() {
                let probe = Probe::new(label.clone(), path.clone()).body(body.clone()).auth(Auth::Without);
                run.send(operation, probe).await;
            }
        }
        // Field by field.
        if let Some(shape) = &operation.body {
            for (label, body) in shape.corpus() {
                run.send(operation, Probe::new(label, path.clone()).body(body)).await;
            }
        }
        // Ids.
        for id in hostile_ids() {
            let mut probe = Probe::new(format!("id {}", abbreviate(&id)), operation.path_with(&id));
            if let Some(shape) = &operation.body {
                probe = probe.body(shape.base());
            }
            if !operation.path_params.is_empty() {
                run.send(operation, probe).await;
            }
        }
        // Query strings.
        for name in &operation.query_params {
            for value in hostile_query_values() {
                let probe = Probe::new(format!("?{name}"), path.clone()).query(format!("{name}={value}"));
                run.send(operation, probe).await;
            }
        }
        if operation.method == Method::GET {
            for query in HOSTILE_QUERIES {
                run.send(operation, Probe::new("query", path.clone()).query((*query).to_owned())).await;
            }
        }
        // Content types.
        if let Some(shape) = &operation.body {
            for content_type in CONTENT_TYPES {
                let value = HeaderValue::from_bytes(content_type).expect("a header value");
                let mut probe = Probe::new(format!("content-type {content_type:?}"), path.clone()).body(shape.base());
                probe.content_type = Some(Some(value));
                run.send(operation, probe).await;
            }
            let mut probe = Probe::new("no content type", path.clone()).body(shape.base());
            probe.content_type = Some(None);
            run.send(operation, probe).await;
        }
        // Credentials and other headers.
        let body = operation.body.as_ref().map(BodyShape::base);
        for (label, value) in credentials(&control.token) {
            let mut probe = Probe::new(label, path.clone()).auth(Auth::Wrong(value));
            probe.body.clone_from(&body);
            run.send(operation, probe).await;
        }
        for (name, value) in [
            (HOST, HeaderValue::from_static("evil.example")),
            (HeaderName::from_static("accept"), HeaderValue::from_static("application/xml")),
            (HeaderName::from_static("x-forwarded-host"), HeaderValue::from_static("evil.example")),
            (HeaderName::from_static("x-weird"), HeaderValue::from_bytes(b"\xff\xfe\x80").expect("obs-text")),
            (HeaderName::from_static("x-long"), HeaderValue::from_str(&"h".repeat(16_000)).expect("header")),
        ] {
            let mut probe = Probe::new(format!("header {name}"), path.clone());
            probe.body.clone_from(&body);
            probe.headers.push((name, value));
            run.send(operation, probe).await;
        }
        run.finish(&operation.label()).await;
    }

    // CR/LF in a header value: the client refuses to send it (the raw probes below do).
    assert!(HeaderValue::from_str("Bearer x\r\nX-Injected: 1").is_err());
    raw_probes(&mut run).await;
    run.finish("the raw probes").await;

    control.signal("0");
    let (status, _) = control.get_json("/groups").await;
    assert_eq!(status, StatusCode::OK, "still serving");
    let log = control.log_text();
    assert!(!log.contains("panicked"), "a panic was logged:\n{log}");
    let total: usize = run.statuses.values().sum();
    println!(
        "hostile: {total} requests in {:.1?}, statuses {:?}; accepted writes (valid by design, then restored): {}",
        started.elapsed(),
        run.statuses,
        run.accepted.len()
    );
    for accepted in &run.accepted {
        println!("  accepted: {accepted:.160}");
    }
    assert!(run.violations.is_empty(), "{} violations:\n{}", run.violations.len(), run.violations.join("\n"));
}

/// A client that opens a connection per request: the server closes a connection whose request
/// body it did not read (a GET with a body, a 413), and a pooled connection would then fail
/// the next request on it.
fn fresh_connections() -> reqwest::Client {
    let _ = http();
    reqwest::Client::builder().pool_max_idle_per_host(0).timeout(Duration::from_secs(30)).build().expect("client")
}

/// Authorization headers that are not the admin token.
fn credentials(token: &str) -> Vec<(String, HeaderValue)> {
    let text = |label: &str, value: String| (label.to_owned(), HeaderValue::from_str(&value).expect("header value"));
    vec![
        text("empty", String::new()),
        text("Bearer alone", "Bearer".into()),
        text("Bearer and a space", "Bearer ".into()),
        text("lower-case scheme", format!("bearer {token}")),
        text("token twice", format!("Bearer {token} {token}")),
        text("token prefix", format!("Bearer {}", &token[..token.len() - 1])),
        text("token and more", format!("Bearer {token}x")),
        text("basic", format!("Basic {token}")),
        text("8 KB token", format!("Bearer {}", "A".repeat(8_000))),
        ("non-UTF-8".into(), HeaderValue::from_bytes(b"Bearer \xff\xfe").expect("obs-text")),
    ]
}

/// What a raw request may get: the server may also close or stay silent (waiting for a body).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// Anything but a 5xx or a 2xx.
    Refused,
    /// Anything but a 5xx (e.g. an unusual but legal request).
    NotFailed,
}

/// Requests reqwest cannot send: CR/LF injection, conflicting lengths, smuggling shapes,
/// unnormalised dot segments. hyper refuses most of them itself (a 4xx with an empty body);
/// whatever answers, it is not a 5xx, a body is the JSON error, and the file is unchanged.
async fn raw_probes(run: &mut Run<'_>) {
    let control = run.control;
    let address = control.origin.strip_prefix("http://").expect("plain HTTP origin").to_owned();
    let token = &control.token;
    let auth = format!("Authorization: Bearer {token}\r\n");
    let post = |path: &str, extra: &str, body: &str| {
        format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\n{extra}Connection: close\r\n\r\n{body}"
        )
    };
    let get = |path: &str, extra: &str| format!("GET {path} HTTP/1.1\r\nHost: x\r\n{extra}Connection: close\r\n\r\n");
    let name = "{\"name\":\"Smuggled\"}";
    let probes: Vec<(&str, Vec<u8>, Expect)> = vec![
        ("CR in a header value", get("/api/admin/groups", &format!("{auth}X-A: a\rb\r\n")).into(), Expect::NotFailed),
        (
            "bare LF in a header value, then an Authorization header",
            get("/api/groups", &format!("X-A: a\nAuthorization: Bearer {token}\r\n")).into(),
            Expect::NotFailed,
        ),
        (
            "injected second Authorization after a bad one",
            get("/api/admin/groups", &format!("Authorization: Bearer x\r\n{auth}")).into(),
            Expect::Refused,
        ),
        (
            "bare LF line endings",
            b"GET /api/groups HTTP/1.1\nHost: x\nConnection: close\n\n".to_vec(),
            Expect::NotFailed,
        ),
        ("obs-fold", get("/api/groups", "X-A: a\r\n b\r\n").into(), Expect::NotFailed),
        ("space in a header name", get("/api/groups", "X A: b\r\n").into(), Expect::Refused),
        ("NUL in a header value", get("/api/groups", "X-A: a\0b\r\n").into(), Expect::Refused),
        (
            "conflicting Content-Length",
            post("/api/admin/groups", &format!("Content-Length: 2\r\nContent-Length: {}\r\n", name.len()), name).into(),
            Expect::Refused,
        ),
        (
            "duplicate Content-Length, equal",
            post("/api/admin/groups", "Content-Length: 2\r\nContent-Length: 2\r\n", "{}").into(),
            Expect::Refused,
        ),
        (
            "Content-Length and chunked",
            post("/api/admin/groups", "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n").into(),
            Expect::Refused,
        ),
        (
            "chunked, then a smuggled request",
            post(
                "/api/admin/groups",
                "Transfer-Encoding: chunked\r\n",
                &format!(
                    "0\r\n\r\nPOST /api/admin/groups HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{name}",
                    name.len()
                ),
            )
            .into(),
            Expect::Refused,
        ),
        (
            "bad chunk size",
            post("/api/admin/groups", "Transfer-Encoding: chunked\r\n", "zz\r\n{}\r\n0\r\n\r\n").into(),
            Expect::Refused,
        ),
        (
            "huge chunk size",
            post(
                "/api/admin/groups",
                "Transfer-Encoding: chunked\r\n",
                &format!("ffffffffffffffff\r\n{}", "x".repeat(70_000)),
            )
            .into(),
            Expect::Refused,
        ),
        (
            "Transfer-Encoding: gzip",
            post("/api/admin/groups", "Transfer-Encoding: gzip\r\n", "{}").into(),
            Expect::Refused,
        ),
        ("negative Content-Length", post("/api/admin/groups", "Content-Length: -1\r\n", "{}").into(), Expect::Refused),
        (
            "overflowing Content-Length",
            post("/api/admin/groups", "Content-Length: 99999999999999999999999\r\n", "{}").into(),
            Expect::Refused,
        ),
        (
            "Content-Length over the limit",
            post("/api/admin/groups", "Content-Length: 10000000\r\n", &"x".repeat(70_000)).into(),
            Expect::Refused,
        ),
        ("NUL in the path", get("/api/groups\0", "").into(), Expect::Refused),
        (
            "raw non-UTF-8 in the path",
            [
                b"GET /api/admin/groups/\xff\xfe HTTP/1.1\r\nHost: x\r\n".as_slice(),
                auth.as_bytes(),
                b"Connection: close\r\n\r\n",
            ]
            .concat(),
            Expect::Refused,
        ),
        ("dot segments", get("/api/admin/groups/../../../etc/passwd", &auth).into(), Expect::Refused),
        ("dot segments without the token", get("/api/admin/../admin/groups", "").into(), Expect::Refused),
        ("double slash without the token", get("/api//admin/groups", "").into(), Expect::Refused),
        ("encoded slash without the token", get("/api/admin%2Fgroups", "").into(), Expect::Refused),
        ("dot segment before admin, without the token", get("/api/./admin/groups", "").into(), Expect::Refused),
        ("upper-case prefix without the token", get("/API/ADMIN/groups", "").into(), Expect::Refused),
        ("absolute-form URI, other host", get("http://evil.example/api/admin/groups", "").into(), Expect::Refused),
        (
            "unknown method",
            format!("FOO /api/admin/groups HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n").into(),
            Expect::Refused,
        ),
        ("HTTP/1.0 without Host", b"GET /api/groups HTTP/1.0\r\n\r\n".to_vec(), Expect::NotFailed),
        ("HTTP/9.9", b"GET /api/groups HTTP/9.9\r\nHost: x\r\n\r\n".to_vec(), Expect::Refused),
        ("70 KB URI", get(&format!("/api/groups?{}", "q".repeat(70_000)), "").into(), Expect::NotFailed),
        ("100 KB header", get("/api/groups", &format!("X-Big: {}\r\n", "b".repeat(100_000))).into(), Expect::NotFailed),
        ("1 MB header", get("/api/groups", &format!("X-Big: {}\r\n", "b".repeat(1 << 20))).into(), Expect::Refused),
        ("200 headers", get("/api/groups", &"X-H: 1\r\n".repeat(200)).into(), Expect::Refused),
        ("garbage", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03".to_vec(), Expect::Refused),
    ];
    for (label, bytes, expect) in probes {
        let answer = raw_request(&address, &bytes).await;
        let what = format!("raw probe {label:?}");
        if let Some((status, body)) = &answer {
            if *status >= 500 {
                run.violation(&what, &format!("{status} {body}"));
            }
            if expect == Expect::Refused && (200..300).contains(status) {
                run.violation(&what, &format!("accepted with {status}: {body}"));
            }
            if !body.is_empty() && *status >= 400 && error_body(body).is_none() {
                run.violation(&what, &format!("{status} without the JSON error body: {body:?}"));
            }
        }
        if answer.is_none() {
            run.violation(&what, "no answer within 2 s");
        }
        println!("{what}: {}", answer.as_ref().map_or("no answer".to_owned(), |(s, _)| s.to_string()));
        run.check_file_unchanged(&what, "");
    }
}

/// Sends `bytes` on a fresh connection; the status and body of the first response, if any
/// arrives within 2 s before the server closes.
async fn raw_request(address: &str, bytes: &[u8]) -> Option<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(address).await.expect("connect");
    // The server may close before reading everything: that is an answer too.
    let _ = stream.write_all(bytes).await;
    let mut received = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(2), stream.read_to_end(&mut received)).await;
    let text = String::from_utf8_lossy(&received);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    let head = head.to_ascii_lowercase();
    let length = head.lines().find_map(|l| l.strip_prefix("content-length:")).and_then(|l| l.trim().parse().ok());
    let body = match length {
        _ if head.contains("transfer-encoding: chunked") => dechunk(body),
        Some(length) => body.get(..length).unwrap_or(body).to_owned(),
        None => body.to_owned(),
    };
    Some((status, body))
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else { break };
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

/// A body far over the limit, over HTTPS (the default listener): the server answers 413 before
/// reading the body, and the client, still uploading, must get that answer rather than a reset
/// connection (control closes its connections lingering, `control/src/linger.rs`). Each try on
/// a new connection, half of them with a client that reads only after sending all it had
/// (as Python's `http.client` does), half with reqwest (which reads while it sends).
#[tokio::test]
async fn an_oversize_body_over_https_always_gets_the_413_error() {
    const TRIES: usize = 20;
    let control = Control::builder()
        .config(Some("server:\n  listen: 127.0.0.1:0\n  eventsListen: 127.0.0.1:0\n"))
        .env("PARTYLINE_BUS", "unix:path=/nonexistent/partyline-test-bus")
        .start()
        .await;
    assert!(control.origin.starts_with("https://"), "TLS is on by default: {}", control.origin);
    let pem = std::fs::read(control.dir().join("tls-cert.pem")).expect("the generated certificate");
    let _ = http();
    let reqwest = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(&pem).expect("pem")])
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client");
    let body = format!("{{\"name\":\"{}\"}}", "a".repeat(2_000_000));

    let mut failures = Vec::new();
    for try_ in 0..TRIES {
        let answer = if try_ % 2 == 0 {
            upload_then_read(&control, &pem, body.as_bytes()).await
        } else {
            let response = reqwest
                .post(control.url("/admin/groups"))
                .bearer_auth(&control.token)
                .header(CONTENT_TYPE, "application/json")
                .body(body.clone())
                .send()
                .await;
            match response {
                Ok(response) => {
                    let status = response.status().as_u16();
                    response.text().await.map(|text| (status, text)).map_err(|e| format!("{e:?}"))
                }
                Err(e) => Err(format!("{e:?}")),
            }
        };
        let client = if try_ % 2 == 0 { "upload, then read" } else { "reqwest" };
        match answer {
            Ok((413, text)) => {
                let body = error_body(&text);
                if body.as_ref().and_then(|b| b["code"].as_str()) != Some("payload_too_large") {
                    failures.push(format!("try {try_} ({client}): 413 without the JSON error: {text:.200}"));
                }
            }
            Ok((status, text)) => failures.push(format!("try {try_} ({client}): {status} {text:.200}")),
            Err(e) => failures.push(format!("try {try_} ({client}): no response: {e:.300}")),
        }
    }
    assert!(failures.is_empty(), "{}/{TRIES} tries without the 413:\n{}", failures.len(), failures.join("\n"));
    assert!(!control.log_text().contains("panicked"), "{}", control.log_text());
}

/// One request on a new TLS connection (trusting `pem`) by a client that sends the whole
/// request before it reads: the status and body of the response, or what went wrong.
async fn upload_then_read(control: &Control, pem: &[u8], body: &[u8]) -> Result<(u16, String), String> {
    use rustls::pki_types::pem::PemObject;
    use std::io::{Read, Write};

    let address = control.origin.strip_prefix("https://").expect("an HTTPS origin").to_owned();
    let head = format!(
        "POST /api/admin/groups HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        control.token,
        body.len()
    );
    let mut request = head.into_bytes();
    request.extend_from_slice(body);
    let pem = pem.to_vec();
    tokio::task::spawn_blocking(move || {
        let mut roots = rustls::RootCertStore::empty();
        let cert = rustls::pki_types::CertificateDer::from_pem_slice(&pem).map_err(|e| e.to_string())?;
        roots.add(cert).map_err(|e| e.to_string())?;
        let config = rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth();
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").map_err(|e| e.to_string())?;
        let connection = rustls::ClientConnection::new(std::sync::Arc::new(config), name).map_err(|e| e.to_string())?;
        let socket = std::net::TcpStream::connect(&address).map_err(|e| e.to_string())?;
        socket.set_read_timeout(Some(Duration::from_secs(30))).map_err(|e| e.to_string())?;
        let mut tls = rustls::StreamOwned::new(connection, socket);
        tls.write_all(&request).map_err(|e| format!("sending: {e}"))?;
        tls.flush().map_err(|e| format!("sending: {e}"))?;
        let mut received = Vec::new();
        // Until the server's close_notify; a reset after the whole response is still an answer.
        let read = tls.read_to_end(&mut received);
        let text = String::from_utf8_lossy(&received);
        let Some((head, body)) = text.split_once("\r\n\r\n") else {
            return Err(format!("receiving: {read:?}, {} bytes", received.len()));
        };
        let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).ok_or(head.to_owned())?;
        Ok((status, body.to_owned()))
    })
    .await
    .expect("the client thread")
}
