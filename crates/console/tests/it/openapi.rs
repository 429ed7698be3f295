//! docs/openapi.json is what `horde_console::openapi::document` makes from the API's types;
//! `HORDE_UPDATE_SCHEMAS=1 cargo test -p horde-console --test it openapi` rewrites it (then say
//! what changed in docs/schemas/CHANGELOG.md).

#[test]
fn the_published_openapi_document_is_the_one_the_types_make() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json");
    let made = serde_json::to_string_pretty(&horde_console::openapi::document()).unwrap() + "\n";
    if std::env::var_os("HORDE_UPDATE_SCHEMAS").is_some() {
        std::fs::write(&path, &made).unwrap();
    }
    let kept = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(kept == made, "docs/openapi.json is stale: rerun with HORDE_UPDATE_SCHEMAS=1 and note the change in docs/schemas/CHANGELOG.md");
    let v: serde_json::Value = serde_json::from_str(&made).unwrap();
    // Every reference resolves.
    let text = made.as_str();
    for r in text.split("\"#/components/schemas/").skip(1) {
        let name = &r[..r.find('"').unwrap()];
        assert!(v["components"]["schemas"].get(name).is_some(), "dangling reference {name}");
    }
}
