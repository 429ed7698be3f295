//! The topology editor's side on the server: a file's text into the raw form the editor edits
//! and back into the canonical TOML `horde emu up` reads (`horde_topo::{parse, render}`), each
//! checked by the emulator's own planner so its error lands on the element it names; files
//! opened from and saved to disk.

use std::path::{Path, PathBuf};

use horde_topo::RawTopology;
use serde::{Deserialize, Serialize};

/// A topology as the editor sees it after a check.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Checked {
    /// The raw form (absent when the text is not a topology at all).
    pub topology: Option<RawTopology>,
    /// Its canonical TOML (what Save writes).
    pub toml: Option<String>,
    /// The planner's first objection, if any.
    pub error: Option<Located>,
    /// Nodes, hosts with a namespace and links after groups are expanded (when it plans).
    pub nodes: usize,
    pub hosts: usize,
    pub links: usize,
}

/// An error and the element it is about.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Located {
    pub field: String,
    pub message: String,
    /// Index of the `[[node]]` entry it names (0-based).
    pub node: Option<usize>,
    /// Index of the `[[link]]` entry it names (0-based).
    pub link: Option<usize>,
}

fn locate(e: &horde_topo::TopoError) -> Located {
    // The planner names elements as "node N (`name`): field" and "link N (a – b): field".
    let index =
        |prefix: &str| e.field.strip_prefix(prefix).and_then(|r| r.split(' ').next()).and_then(|n| n.parse::<usize>().ok()).and_then(|n| n.checked_sub(1));
    Located { field: e.field.clone(), message: e.msg.clone(), node: index("node "), link: index("link ") }
}

fn check(raw: Option<RawTopology>, text: &str) -> Checked {
    let toml = raw.as_ref().map(horde_topo::render);
    match horde_topo::plan(toml.as_deref().unwrap_or(text), "topology", "check") {
        Ok(p) => {
            Checked { nodes: p.nodes.len(), hosts: p.nodes.iter().filter(|n| !n.kind.is_l2()).count(), links: p.links.len(), topology: raw, toml, error: None }
        }
        Err(e) => Checked { topology: raw, toml, error: Some(locate(&e)), nodes: 0, hosts: 0, links: 0 },
    }
}

/// A file's text: parsed, rendered and planned.
pub fn check_text(text: &str) -> Checked {
    match horde_topo::parse(text, "topology") {
        Ok(raw) => check(Some(raw), text),
        Err(e) => check(None, text).with_error(locate(&e)),
    }
}

/// The editor's raw form: rendered and planned.
pub fn check_raw(raw: RawTopology) -> Checked {
    check(Some(raw), "")
}

impl Checked {
    fn with_error(mut self, e: Located) -> Checked {
        self.error = Some(e);
        self
    }
}

/// An open request: a file by path, or a file's text.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OpenTopology {
    /// A topology file to read (relative to the console's directory) ...
    pub path: Option<std::path::PathBuf>,
    /// ... or a file's text (an upload from the browser).
    pub text: Option<String>,
}

/// Where saved topologies go: `RUNS/topologies/NAME.toml`.
pub fn saved_dir(runs_dir: &Path) -> PathBuf {
    runs_dir.join("topologies")
}

/// A save request: a name (the file's stem) and the raw form.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Save {
    /// 1..=64 letters, digits, - or _; the file is `RUNS/topologies/NAME.toml`.
    pub name: String,
    pub topology: RawTopology,
}

/// Writes `req` as canonical TOML (through a temporary file, so a half-written file never
/// replaces a good one); returns the path.
pub fn save(runs_dir: &Path, req: &Save) -> Result<PathBuf, String> {
    let ok = !req.name.is_empty() && req.name.len() <= 64 && req.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !ok {
        return Err(format!("name `{}`: must be 1..=64 letters, digits, - or _ (it names the file NAME.toml)", req.name.escape_debug()));
    }
    std::fs::create_dir_all(runs_dir).map_err(|e| format!("creating {}: {e}", runs_dir.display()))?;
    // never through a link planted in the runs directory (issue 66)
    let sub = saved_dir(runs_dir).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    horde_sys::fs::write_beneath(runs_dir, &sub, &format!("{}.toml", req.name), horde_topo::render(&req.topology).as_bytes())
        .map_err(|e| format!("writing {}.toml in {}: {e} (a link there is not followed)", req.name, saved_dir(runs_dir).display()))
}

/// Reads a topology file (a `.toml` the console's user can read, at most the size `horde emu`
/// takes).
pub fn open(path: &Path) -> Result<String, String> {
    if path.extension().is_none_or(|e| e != "toml") {
        return Err(format!("{}: a topology file ends in .toml", path.display()));
    }
    horde_model::files::read_text(path, horde_model::files::MAX_TOML, "topology files").map_err(|e| e.to_string())
}

/// Topology files to offer: the saved ones, then `examples/topologies/` under the console's
/// directory (at most 500).
pub fn list(runs_dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for dir in [saved_dir(runs_dir), PathBuf::from("examples/topologies")] {
        let Ok(rd) = std::fs::read_dir(&dir) else { continue };
        let mut v: Vec<String> = rd
            .filter_map(|e| e.ok())
            .take(5_000)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "toml") && p.file_name().is_some_and(|n| !n.to_string_lossy().starts_with('.')))
            .map(|p| p.display().to_string())
            .collect();
        v.sort();
        out.extend(v);
    }
    out.truncate(500);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_land_on_the_element_they_name() {
        let c = check_text("name = \"x\"\n[[node]]\nname = \"a\"\nkind = \"host\"\n[[node]]\nname = \"b\"\nkind = \"host\"\n[[link]]\na = \"a\"\nb = \"b\"\ndelay = \"soon\"\n");
        let e = c.error.unwrap();
        assert_eq!((e.link, e.node), (Some(0), None), "{e:?}");
        assert!(e.field.contains("delay"), "{e:?}");
        let c = check_text("name = \"x\"\n[[node]]\nname = \"a b\"\nkind = \"host\"\n");
        assert_eq!(c.error.unwrap().node, Some(0));
        let c = check_text("name = ");
        assert!(c.topology.is_none() && c.error.unwrap().field == "syntax");
    }

    #[test]
    fn a_good_file_plans_and_renders() {
        let c = check_text(
            "name = \"x\"\n[[node]]\nname = \"h\"\nkind = \"host\"\ncount = 3\n[[node]]\nname = \"s\"\nkind = \"switch\"\n[[link]]\na = \"h\"\nb = \"s\"\n",
        );
        assert!(c.error.is_none());
        assert_eq!((c.nodes, c.hosts, c.links), (4, 3, 3));
        assert!(c.toml.unwrap().contains("count = 3"));
    }

    #[test]
    fn names_cannot_leave_the_directory() {
        let dir = std::env::temp_dir().join(format!("horde-topo-save-{}", std::process::id()));
        let raw = horde_topo::parse("name = \"x\"\n", "t").unwrap();
        for bad in ["../x", "", "a/b", ".hidden", "x.toml"] {
            assert!(save(&dir, &Save { name: bad.into(), topology: raw.clone() }).is_err(), "{bad}");
        }
        let p = save(&dir, &Save { name: "ok".into(), topology: raw }).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "name = \"x\"\n");
        assert!(open(Path::new("/etc/passwd")).is_err());
        let _ = std::fs::remove_dir_all(dir);
    }
}
