//! Helpers shared by the agent's integration tests.
#![allow(dead_code)]

use std::path::Path;

use horde_agent::agent::AgentOptions;

/// An agent listening on `ip` (any port), its run directory `dir/name`, no metrics, at most 16
/// handshakes, speaking `version`.
pub fn agent_options(ip: &str, creds: &Path, dir: &Path, name: &str, version: &str) -> AgentOptions {
    AgentOptions {
        emu: false,
        no_exec: false,
        listen: format!("{ip}:0").parse().unwrap(),
        credentials: creds.to_path_buf(),
        dir: dir.join(name),
        name: name.into(),
        metrics: None,
        keep: false,
        max_handshakes: 16,
        exempt: Vec::new(),
        version: version.into(),
    }
}

/// The controller's notes, collected from its events.
#[derive(Default)]
pub struct Notes(std::sync::Mutex<Vec<String>>);

impl Notes {
    pub fn event(&self, e: &horde_agent::controller::Event) {
        if let horde_agent::controller::Event::Note(n) = e {
            self.0.lock().unwrap().push(n.clone());
        }
    }

    pub fn take(self) -> Vec<String> {
        self.0.into_inner().unwrap()
    }
}

/// A scratch directory of the test's own, removed when dropped.
pub fn tmp(name: &str) -> horde_testkit::Scratch {
    horde_testkit::Scratch::new(&format!("agent-{name}"))
}
