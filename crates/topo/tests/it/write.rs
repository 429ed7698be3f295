//! The raw form and its canonical TOML: what the console's editor opens and saves.

use horde_topo::{parse, plan, render};

fn examples() -> Vec<(String, String)> {
    let dir = format!("{}/../../examples/topologies", env!("CARGO_MANIFEST_DIR"));
    let mut v: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .map(|p| (p.display().to_string(), std::fs::read_to_string(&p).unwrap()))
        .collect();
    v.sort();
    assert!(v.len() >= 3, "{v:?}");
    v
}

#[test]
fn every_example_keeps_its_meaning_through_the_editor_form() {
    for (file, text) in examples() {
        let raw = parse(&text, &file).unwrap();
        let written = render(&raw);
        assert_eq!(parse(&written, "written").unwrap(), raw, "{file}");
        // the same plan: nodes, links, addresses, routes, impairments
        assert_eq!(plan(&written, "written", "t").unwrap(), plan(&text, &file, "t").unwrap(), "{file}\n{written}");
        // and a file the writer wrote comes back byte for byte
        assert_eq!(render(&parse(&written, "written").unwrap()), written, "{file}");
    }
}

#[test]
fn a_file_the_editor_wrote_round_trips_exactly() {
    let text = r#"name = 'lab "one"'

[[node]]
name = "h"
kind = "host"
count = 3
ui = { x = 120, y = -40, page = "edge" }

[[node]]
name = "r1"
kind = "router"
machine = "10.0.0.12:7801"
ui = { x = 300, y = 200 }

[[node]]
name = "sw1"
kind = "hub"

[[link]]
a = "h"
b = "sw1"
subnet = "10.1.0.0/24"

[[link]]
a = "r1"
b = "sw1"
live = true
delay = "10ms"
loss = { p = "1%", r = "25%", loss_bad = "50%" }
reorder = true
[link.ab]
rate = "10mbit"
queue = "64kB"
[link.ba]
jitter = "2ms"
"#;
    let raw = parse(text, "lab.toml").unwrap();
    assert_eq!(raw.node[0].ui.as_ref().unwrap().page.as_deref(), Some("edge"));
    assert_eq!(raw.node[1].machine.as_deref(), Some("10.0.0.12:7801"));
    assert_eq!(render(&raw), text);
    plan(text, "lab.toml", "t").unwrap();
}

#[test]
fn placement_is_checked_like_every_other_field() {
    let bad = "name = \"x\"\n[[node]]\nname = \"a\"\nkind = \"host\"\nui = { x = 1, y = 2, colour = \"red\" }\n";
    let e = parse(bad, "x.toml").unwrap_err();
    assert!(e.to_string().contains("colour"), "{e}");
    assert!(plan(bad, "x.toml", "t").is_err());
}
