//! The console API's OpenAPI 3.1 document, made from the types the API speaks (the schemas are
//! schemars' output for them: the same types as `--progress json` and `--commands`). Kept in
//! docs/openapi.json; `tests/it/openapi.rs` fails when the file is not what this makes
//! (`HORDE_UPDATE_SCHEMAS=1 cargo test -p horde-console` rewrites it).

use serde_json::{json, Value};

/// The API's version (the paths' `/api/v1`); bumped by incompatible changes.
pub const VERSION: &str = "1.2.0";

fn schema<T: schemars::JsonSchema>() -> Value {
    let mut s = serde_json::to_value(schemars::schema_for!(T)).unwrap_or_default();
    // Definitions move to components; references follow them.
    let defs = s.as_object_mut().and_then(|o| o.remove("definitions"));
    let mut text = s.to_string().replace("#/definitions/", "#/components/schemas/");
    if let Some(d) = defs {
        text = format!("{{\"schema\":{text},\"defs\":{}}}", d.to_string().replace("#/definitions/", "#/components/schemas/"));
    } else {
        text = format!("{{\"schema\":{text},\"defs\":{{}}}}");
    }
    serde_json::from_str(&text).unwrap_or_default()
}

pub fn document() -> Value {
    let mut components = serde_json::Map::new();
    let mut add = |name: &str, v: Value| {
        if let Some(d) = v["defs"].as_object() {
            for (k, s) in d {
                components.insert(k.clone(), s.clone());
            }
        }
        let mut s = v["schema"].clone();
        if let Some(o) = s.as_object_mut() {
            o.remove("$schema");
        }
        components.insert(name.into(), s);
    };
    add("EventLine", schema::<horde_scenario::EventLine>());
    add("Command", schema::<horde_scenario::control::Command>());
    add("RunInfo", schema::<crate::hub::RunInfo>());
    add("StartRun", schema::<crate::runs::StartRun>());
    add("PastRun", schema::<crate::runs::PastRun>());
    add("Topology", schema::<horde_topo::RawTopology>());
    add("ScenarioFile", schema::<horde_model::scenario::RawScenario>());
    add("Checked", schema::<crate::topo::Checked>());
    add("OpenTopology", schema::<crate::topo::OpenTopology>());
    add("SaveTopology", schema::<crate::topo::Save>());
    add("EmuStatus", schema::<crate::emu::Status>());
    add("EmuUp", schema::<crate::emu::Up>());
    add("Experiment", schema::<crate::emu::Detail>());
    add("Counters", schema::<crate::emu::Counters>());
    add("LinkSet", schema::<crate::emu::LinkSet>());
    add("Exec", schema::<crate::emu::Exec>());
    add("Ran", schema::<crate::emu::Ran>());
    add("LinkNow", schema::<crate::emu::LinkNow>());
    add("Reply", schema::<horde_scenario::control::Reply>());
    add("EmuDown", schema::<crate::emu::Down>());
    components.insert("Error".into(), json!({"type": "object", "required": ["error"], "properties": {"error": {"type": "string", "description": "What is wrong and how to fix it (the CLI's message)"}}}));
    let r = |name: &str| json!({ "$ref": format!("#/components/schemas/{name}") });
    let err = |what: &str| json!({ "description": what, "content": { "application/json": { "schema": r("Error") } } });
    let ok = |what: &str, s: Value| json!({ "description": what, "content": { "application/json": { "schema": s } } });
    let id = json!([{ "name": "id", "in": "path", "required": true, "schema": { "type": "integer", "minimum": 1 } }]);
    let exp = json!([{ "name": "id", "in": "path", "required": true, "description": "Experiment id (as horde emu up prints it)", "schema": { "type": "string", "pattern": "^[a-z0-9]{1,6}$" } }]);
    let body = |name: &str| json!({ "required": true, "content": { "application/json": { "schema": r(name) } } });
    let guarded = json!({ "401": err("No token or a wrong one"), "403": err("The Host header does not name the console, or another site's page sent it") });
    let with = |mut m: Value| {
        if let (Some(o), Some(g)) = (m.as_object_mut(), guarded.as_object()) {
            o.extend(g.clone());
        }
        m
    };
    json!({
        "openapi": "3.1.0",
        "info": { "title": "Horde console API", "version": VERSION, "description": "The run driver's typed events and commands over HTTP (horde ui). Every request but the page and its assets carries the token `horde ui` printed: Authorization: Bearer TOKEN. Where a browser cannot send that header (EventSource, a report opened in a new tab), a one-time ticket from POST /api/v1/tickets goes in the query as ?ticket=…. The console sets no cookie." },
        "components": { "schemas": components, "securitySchemes": { "token": { "type": "http", "scheme": "bearer" }, "ticket": { "type": "apiKey", "in": "query", "name": "ticket" } } },
        "security": [{ "token": [] }, { "ticket": [] }],
        "paths": {
            "/api/v1/runs": {
                "get": { "summary": "Runs the console holds", "responses": with(json!({ "200": ok("The runs", json!({ "type": "array", "items": r("RunInfo") })) })) },
                "post": { "summary": "Start a scenario (as horde run FILE with its overrides)", "requestBody": { "required": true, "content": { "application/json": { "schema": r("StartRun") } } },
                    "responses": with(json!({ "201": ok("Started", r("RunInfo")), "400": err("A bad scenario or override, named as horde run names it; or it needs root"), "409": err("Attached to one run, or too many running") })) }
            },
            "/api/v1/runs/{id}": { "get": { "summary": "One run", "parameters": id, "responses": with(json!({ "200": ok("The run", r("RunInfo")), "404": err("No such run") })) } },
            "/api/v1/runs/{id}/commands": { "post": { "summary": "A command to a running run: the same object as a --commands line", "parameters": id,
                "requestBody": { "required": true, "content": { "application/json": { "schema": r("Command") } } },
                "responses": with(json!({ "200": ok("Applied: the run's answer (when it takes effect on the run's clock, what it did)", r("Reply")), "400": err("Not a command, or a bad value"), "404": err("No such run"), "409": ok("Refused: the run's answer with the reason (or the run has finished, is stopping, or ended before it answered)", r("Reply")), "429": err("Too many commands wait for their answer"), "504": err("The run did not answer within 10 s") })) } },
            "/api/v1/runs/{id}/events": { "get": { "summary": "The run's event lines as server-sent events; each event's id is its line number: reconnect with Last-Event-ID (or ?after=N) to resume", "parameters": id,
                "responses": with(json!({ "200": { "description": "text/event-stream; each data is one EventLine", "content": { "text/event-stream": { "schema": r("EventLine") } } }, "404": err("No such run") })) } },
            "/api/v1/runs/{id}/report/{path}": { "get": { "summary": "A file of the run's report directory (index.html, summary.json, charts/…)", "parameters": [id[0].clone(), { "name": "path", "in": "path", "required": true, "schema": { "type": "string" } }],
                "responses": with(json!({ "200": { "description": "The file" }, "404": err("Not a file of the report") })) } },
            "/api/v1/tickets": { "post": { "summary": "A one-time ticket (30 s) for one path where a browser cannot send the token's header: a run's event stream or a report file, shown as ?ticket=…", "requestBody": { "required": true, "content": { "application/json": { "schema": { "type": "object", "required": ["path"], "properties": { "path": { "type": "string", "examples": ["/api/v1/runs/1/events"] } } } } } }, "responses": with(json!({ "200": ok("The ticket", json!({ "type": "object", "required": ["ticket", "path", "expires_in_s"], "properties": { "ticket": { "type": "string" }, "path": { "type": "string" }, "expires_in_s": { "type": "integer" } } })), "400": err("Not a path a ticket is for") })) } },
            "/api/v1/past": { "get": { "summary": "Past runs: report directories under the runs directory, newest first, with their verdicts", "responses": with(json!({ "200": ok("Past runs", json!({ "type": "array", "items": r("PastRun") })) })) } },
            "/api/v1/compare": { "post": { "summary": "Report directories of the runs directory side by side against the first (`horde compare`): `{\"reports\": [NAME, …], \"alpha\": 0.05}`, 2 to 8 names",
                "requestBody": { "required": true, "content": { "application/json": { "schema": { "type": "object", "required": ["reports"], "properties": { "reports": { "type": "array", "items": { "type": "string" }, "minItems": 2, "maxItems": 8 }, "alpha": { "type": "number" } } } } } },
                "responses": with(json!({ "200": ok("horde compare --json's document, and its page as `html`", json!({ "type": "object" })), "400": err("A name that is not a report directory, a summary that is not a players' run's, or a link") })) } },
            "/api/v1/scenario-schema": { "get": { "summary": "The scenario file's JSON schema (what the page's start form is made from; a start's `form` follows it)", "responses": with(json!({ "200": ok("JSON Schema (draft-07)", r("ScenarioFile")) })) } },
            "/api/v1/topologies": {
                "get": { "summary": "Topology files to open: the saved ones (RUNS/topologies/) and examples/topologies/", "responses": with(json!({ "200": ok("Paths", json!({ "type": "object" })) })) },
                "put": { "summary": "Save the editor's topology as canonical TOML in RUNS/topologies/NAME.toml", "requestBody": body("SaveTopology"),
                    "responses": with(json!({ "200": ok("Saved: the path and the planner's verdict", json!({ "type": "object" })), "400": err("A bad name or topology") })) }
            },
            "/api/v1/topologies/open": { "post": { "summary": "A topology file (by path, or its text) into the editor's form, checked by the emulator's planner", "requestBody": body("OpenTopology"),
                "responses": with(json!({ "200": ok("The form, its canonical TOML and the planner's first objection (on the element it names)", r("Checked")), "400": err("Not a readable .toml file") })) } },
            "/api/v1/topologies/check": { "post": { "summary": "The editor's form: its canonical TOML and the planner's verdict", "requestBody": body("Topology"),
                "responses": with(json!({ "200": ok("Checked", r("Checked")), "400": err("Not a topology form") })) } },
            "/api/v1/emu": {
                "get": { "summary": "Running experiments, and why none can be brought up here (not root) if so", "responses": with(json!({ "200": ok("Status", r("EmuStatus")) })) },
                "post": { "summary": "Bring a topology file up (horde emu up FILE [--live]); needs root", "requestBody": body("EmuUp"),
                    "responses": with(json!({ "201": ok("Up: its experiment id", json!({ "type": "object" })), "400": err("The emulator's message"), "403": err("Needs root") })) }
            },
            "/api/v1/emu/{id}": {
                "get": { "summary": "An experiment's nodes (with their entries and addresses) and links", "parameters": exp, "responses": with(json!({ "200": ok("The experiment", r("Experiment")), "404": err("No such experiment") })) },
                "delete": { "summary": "Take it down (horde emu down ID --keep-to RUNS/emu-ID); needs root", "parameters": exp, "responses": with(json!({ "200": ok("Down", r("EmuDown")), "400": err("The emulator's message"), "403": err("Needs root") })) }
            },
            "/api/v1/emu/{id}/counters": { "get": { "summary": "The link emulator's counters now (rates are their change between two reads)", "parameters": exp, "responses": with(json!({ "200": ok("Counters", r("Counters")), "404": err("No such experiment") })) } },
            "/api/v1/emu/{id}/link": { "post": { "summary": "Change a link while it runs (horde emu link; a link between groups changes every member pair); needs root", "parameters": exp, "requestBody": body("LinkSet"),
                "responses": with(json!({ "200": ok("What each node pair's link is now", json!({ "type": "array", "items": r("LinkNow") })), "400": err("A bad value, named as horde emu link names it"), "403": err("Needs root") })) } },
            "/api/v1/emu/{id}/exec": { "post": { "summary": "Run a command in a node (horde emu exec; stopped after 20 s; output cut at 256 KiB); needs root", "parameters": exp, "requestBody": body("Exec"),
                "responses": with(json!({ "200": ok("Its exit status and output", r("Ran")), "400": err("A bad command"), "403": err("Needs root") })) } },
            "/api/v1/openapi.json": { "get": { "summary": "This document", "responses": with(json!({ "200": { "description": "OpenAPI 3.1" } })) } }
        }
    })
}
