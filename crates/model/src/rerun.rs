//! What a report directory keeps so that `horde run REPORT_DIR` runs its experiment again: the
//! scenario as it ran (the command line's overrides written into it), and every file it read —
//! the service file and the `file(...)` value lists it names (inlined as `values(...)`), the
//! topology file — under fixed names beside it, so that the directory can be copied anywhere.
//!
//! Pure: text in, texts out; the caller writes them.

use crate::scenario::{Scenario, ScenarioError};

/// The file a report's scenario names for its service, when that is a file.
pub const SERVICE_FILE: &str = "service.toml";
/// The file a report's scenario names for its topology (`[emu]`).
pub const TOPOLOGY_FILE: &str = "topology.toml";

/// A scenario made self-contained: its text, and the files it names (name, content).
#[derive(Debug, Clone, PartialEq)]
pub struct Inputs {
    pub scenario: String,
    pub files: Vec<(&'static str, String)>,
    /// What could not be kept, said in the report (e.g. a run key file, which is a secret: the
    /// run again makes a fresh key, which changes no departure).
    pub notes: Vec<String>,
}

/// The scenario `sc` as it ran, self-contained. `topology` is the `[emu]` topology file's text
/// (the caller read it when it built the topology).
pub fn inputs(sc: &Scenario, topology: Option<&str>) -> Result<Inputs, ScenarioError> {
    let fail = |field: &str, msg: String| ScenarioError { file: sc.name.clone(), field: field.to_string(), msg };
    let mut doc: toml_edit::DocumentMut = sc.text.parse().map_err(|e: toml_edit::TomlError| fail("syntax", e.to_string()))?;
    let mut files = Vec::new();
    let mut notes = Vec::new();
    let service = doc.get("service").and_then(|v| v.as_str()).unwrap_or_default().to_string();
    if !crate::service::BUILTINS.iter().any(|b| b.0 == service) {
        let text = crate::dist::inline_value_files(&sc.service.text).map_err(|m| fail("service", m))?;
        files.push((SERVICE_FILE, text));
        doc["service"] = toml_edit::value(SERVICE_FILE);
    }
    if let Some(e) = &sc.emu {
        match topology {
            Some(t) => {
                files.push((TOPOLOGY_FILE, t.to_string()));
                doc["emu"]["topology"] = toml_edit::value(TOPOLOGY_FILE);
            }
            None => {
                let abs = std::path::absolute(&e.topology).unwrap_or_else(|_| e.topology.clone());
                notes.push(format!("the topology file was not readable when the report was written: the scenario names it where it was ({})", abs.display()));
                doc["emu"]["topology"] = toml_edit::value(abs.display().to_string());
            }
        }
    }
    // The command line's overrides, as values: the run again is this run.
    doc["players"] = toml_edit::value(i64::from(sc.players));
    match sc.online {
        Some(n) => doc["online"] = toml_edit::value(i64::from(n)),
        None => {
            doc.remove("online");
        }
    }
    let ns = (sc.duration_s * 1e9).round() as u64;
    doc["duration"] = toml_edit::value(if ns.is_multiple_of(1_000_000_000) { format!("{}s", ns / 1_000_000_000) } else { format!("{ns}ns") });
    let seed = i64::try_from(sc.seed).map_err(|_| fail("seed", format!("{} does not fit a TOML integer (at most {})", sc.seed, i64::MAX)))?;
    doc["seed"] = toml_edit::value(seed);
    doc["gso"] = toml_edit::value(match sc.gso {
        crate::gso::Gso::On => "on",
        crate::gso::Gso::Off => "off",
        crate::gso::Gso::Auto => "auto",
    });
    if doc.remove("key_file").is_some() {
        notes.push("the run's key file is not kept (a secret): the run again makes a fresh key, which changes no departure".into());
    }
    // Agents and their credentials are this network's, not the experiment's: kept as absolute
    // paths, so that the copy still finds them on this machine.
    if let Some(a) = &sc.agents {
        let abs = |p: &std::path::Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()).display().to_string();
        let list: toml_edit::Array = a
            .list
            .iter()
            .map(|e| match e.strip_prefix('@') {
                Some(f) => format!("@{}", abs(std::path::Path::new(f))),
                None => e.clone(),
            })
            .collect();
        doc["agents"]["list"] = toml_edit::value(list);
        if let Some(c) = &a.credentials {
            doc["agents"]["credentials"] = toml_edit::value(abs(c));
        }
    }
    let scenario = crate::dist::inline_value_files(&doc.to_string()).map_err(|m| fail("file", m))?;
    Ok(Inputs { scenario, files, notes })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn parse(text: &str, dir: &Path) -> Scenario {
        Scenario::parse(text, "sc.toml", dir).unwrap()
    }

    /// The kept scenario parses beside its kept files to the scenario that ran, overrides
    /// and all.
    #[test]
    fn a_kept_scenario_is_the_one_that_ran() {
        let dir = std::env::temp_dir().join(format!("horde-rerun-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("svc")).unwrap();
        let values = dir.join("gaps.txt");
        std::fs::write(&values, "10 20 30").unwrap();
        let svc = Scenario::parse("service = \"quake3-ditg\"\nplayers = 1\nduration = \"1s\"\n", "x", &dir).unwrap().service.text;
        std::fs::write(dir.join("svc/game.toml"), svc.replacen("\"normal(130, 30, round=nearest, min=20)\"", &format!("\"file({})\"", values.display()), 1))
            .unwrap();
        let text = "# my experiment\nservice = \"svc/game.toml\"\nplayers = 4\nduration = \"3s\"\nseed = 9\nkey_file = \"run.key\"\n";
        let mut sc = parse(text, &dir);
        sc.players = 6;
        sc.online = Some(2);
        sc.duration_s = 2.5;
        sc.seed = 77;
        sc.gso = crate::gso::Gso::Off;
        let kept = inputs(&sc, None).unwrap();
        assert!(kept.scenario.starts_with("# my experiment\n"), "comments stay: {}", kept.scenario);
        assert_eq!(kept.files.len(), 1);
        assert!(!kept.files[0].1.contains("file(") && kept.files[0].1.contains("down.size = \"values(10, 20, 30)\""), "value files inlined");
        assert_eq!(kept.notes.len(), 1, "the key file is said to be left out");
        let copy = dir.join("copy");
        std::fs::create_dir_all(&copy).unwrap();
        for (name, text) in &kept.files {
            std::fs::write(copy.join(name), text).unwrap();
        }
        let again = parse(&kept.scenario, &copy);
        assert_eq!((again.players, again.online, again.duration_s, again.seed, again.gso), (6, Some(2), 2.5, 77, crate::gso::Gso::Off));
        assert_eq!(again.key_file, None);
        assert_eq!(again.service.text, kept.files[0].1);
        assert_eq!(again.segments(), sc.segments(), "the same behaviour");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_seed_beyond_toml_is_refused_and_an_emu_run_keeps_its_topology() {
        let mut sc = parse("service = \"wow\"\nplayers = 1\nduration = \"1s\"\n", Path::new("."));
        sc.seed = u64::MAX;
        assert_eq!(inputs(&sc, None).unwrap_err().field, "seed");
        let sc = parse("service = \"wow\"\nplayers = 1\nduration = \"1s\"\n[emu]\ntopology = \"t.toml\"\nclients = [\"c\"]\nserver = \"s\"\n", Path::new("."));
        let unread = inputs(&sc, None).unwrap();
        assert!(unread.files.is_empty() && unread.notes[0].contains("not readable"), "{unread:?}");
        let kept = inputs(&sc, Some("name = \"t\"\n")).unwrap();
        assert!(kept.scenario.contains("topology = \"topology.toml\""), "{}", kept.scenario);
        assert_eq!(kept.files, vec![(TOPOLOGY_FILE, "name = \"t\"\n".to_string())]);
    }
}
