//! The fit report as a tested contract: its JSON Schema, generated from the type, is pinned in
//! docs/schemas/fit.schema.json, and a real report follows it. After a deliberate change:
//! `HORDE_UPDATE_SCHEMAS=1 cargo test -p horde-fit --test it contract`, then a line in
//! docs/schemas/CHANGELOG.md.

use std::path::Path;

use horde_fit::{fit_capture, FitReport, Options};

#[test]
fn the_fit_report_follows_its_pinned_schema() {
    let schema = schemars::schema_for!(FitReport);
    let text = serde_json::to_string_pretty(&schema).unwrap() + "\n";
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/schemas/fit.schema.json");
    if std::env::var_os("HORDE_UPDATE_SCHEMAS").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(committed == text, "{} differs from FitReport: if deliberate, run HORDE_UPDATE_SCHEMAS=1 cargo test -p horde-fit --test it contract and add a line to docs/schemas/CHANGELOG.md", path.display());
    let bytes = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/horde-ground-truth.pcapng")).unwrap();
    let report = fit_capture(|| Ok(&bytes[..]), &Options::default()).unwrap();
    let instance = serde_json::to_value(&report).unwrap();
    let schema: serde_json::Value = serde_json::from_str(&text).unwrap();
    let compiled = jsonschema::JSONSchema::compile(&schema).expect("the schema compiles");
    let msgs: Vec<String> = match compiled.validate(&instance) {
        Ok(()) => Vec::new(),
        Err(errors) => errors.take(5).map(|e| format!("{} at {}", e, e.instance_path)).collect(),
    };
    assert!(msgs.is_empty(), "the fit report does not follow its schema: {msgs:#?}");
    // the fields the issue names are there
    let d = &instance["directions"][0];
    for key in ["direction", "state", "idt", "size"] {
        assert!(!d[key].is_null(), "{key} missing: {d}");
    }
    for key in ["family", "params", "mean_ms", "ks", "n", "candidates"] {
        assert!(!d["idt"][key].is_null(), "idt.{key} missing");
    }
    assert!(!d["size"]["mean_bytes"].is_null());
}
