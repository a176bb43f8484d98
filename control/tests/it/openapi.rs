//! The checked-in OpenAPI document (`control/openapi.json`) is the one the code generates.
//! After an API change: `UPDATE_EXPECT=1 cargo test -p partyline-control --test it openapi`.

#[test]
fn checked_in_openapi_document_is_current() {
    let document = partyline_control::api::openapi().to_pretty_json().expect("renders");
    expect_test::expect_file!["../../openapi.json"].assert_eq(&document);
}

#[test]
fn every_admin_operation_requires_the_bearer_token() {
    let document = partyline_control::api::openapi();
    for (path, item) in &document.paths.paths {
        let operations = [&item.get, &item.post, &item.put, &item.delete];
        for operation in operations.into_iter().flatten() {
            let secured = operation.security.as_ref().is_some_and(|s| !s.is_empty());
            let admin = path.starts_with("/api/admin/") || path == "/metrics";
            assert_eq!(secured, admin, "{path}: security declared iff admin");
        }
    }
}

/// OpenAPI requires an operation id to be unique in the document (client generators name
/// their functions after it); utoipa's default is the handler's name, which modules repeat.
#[test]
fn every_operation_id_is_unique() {
    let document = partyline_control::api::openapi();
    let mut seen = std::collections::BTreeMap::new();
    for (path, item) in &document.paths.paths {
        let operations = [&item.get, &item.post, &item.put, &item.delete, &item.patch];
        for operation in operations.into_iter().flatten() {
            let id = operation.operation_id.clone().unwrap_or_default();
            if let Some(first) = seen.insert(id.clone(), path.clone()) {
                panic!("operation id {id:?} used by {first} and {path}");
            }
        }
    }
}
