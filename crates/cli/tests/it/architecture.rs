//! The architecture's invariants, checked — in the spirit of rust-analyzer's tidy tests.
//!
//! ARCHITECTURE.md states each invariant in words and names this file; the rules themselves —
//! the layer order, the I/O layer, where our binary may start — are written here, in the test
//! (rust-analyzer's tidy), and `architecture_md_states_these_rules` checks the document says the
//! same. It asks `cargo metadata` for the crates' dependencies and parses every source file of
//! `crates/*/src` with `syn`. It fails when:
//! - a crate depends on a crate of its own or a higher layer (`dependencies_follow_the_layers`);
//! - a crate outside the I/O layer opens a socket, reads a clock (its wrappers included), sleeps
//!   or calls libc (`only_the_io_layer_does_io`);
//! - the modules of a crate import each other in a circle, paths inside macro bodies included
//!   (`no_import_circles`);
//! - a source file passes 800 lines or a function 150 (`files_and_functions_stay_small`);
//! - a crate has an integration-test binary beside `tests/it/main.rs`, or a test that needs
//!   root outside `it::root::` (`one_integration_test_binary_per_crate`);
//! - our own binary is started other than through `horde_sys::own`, a child is armed other than
//!   by its one `pre_exec`, or our processes talk through argv and prefixed text lines
//!   (`our_own_processes_start_one_way`; its expectations are written here, in the test).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Longest source file, in lines (the codebases we follow keep files focused; ENGINEERING.md).
const MAX_FILE_LINES: usize = 800;
/// Longest function or method body, in lines, signature to closing brace.
const MAX_FN_LINES: usize = 150;

/// Violations allowed for now, each with the issue that removes it. Empty since issue 22 moved
/// the last socket loops into the engine's shells and the clocks behind `horde-sys`; keep it
/// so. The list may only shrink: a violation not listed fails the test, and so does a listed
/// one that no longer occurs (remove it here).
const KNOWN: &[&str] = &[];

/// Fails on any violation not in [`KNOWN`], and on any entry of [`KNOWN`] no violation matches.
fn ratchet(what: &str, found: Vec<String>, key: impl Fn(&str) -> String) {
    let keys: Vec<String> = found.iter().map(|f| key(f)).collect();
    let new: Vec<&String> = found.iter().zip(&keys).filter(|(_, k)| !KNOWN.contains(&k.as_str())).map(|(f, _)| f).collect();
    assert!(new.is_empty(), "{what}:\n{}", new.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n"));
    let kind = |k: &str| {
        if k.contains(": fn ") {
            2
        } else if k.contains(" ↔ ") {
            1
        } else {
            0
        }
    };
    let mine = if what.starts_with("too long") {
        2
    } else if what.starts_with("modules") {
        1
    } else {
        0
    };
    let gone: Vec<&str> = KNOWN.iter().copied().filter(|k| kind(k) == mine && !keys.iter().any(|x| x == k)).collect();
    assert!(gone.is_empty(), "{what}: fixed, remove from KNOWN in {}: {gone:?}", file!());
}

/// `crates/x/src/f.rs` of an absolute path.
fn rel(path: &str) -> String {
    path.find("crates/").map_or(path.to_string(), |i| path[i..].to_string())
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

fn architecture_md() -> String {
    std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("reading ARCHITECTURE.md")
}

/// The words after `marker` on its line of ARCHITECTURE.md, backticks removed.
fn stated(marker: &str) -> String {
    let text = architecture_md();
    let line = text.lines().find(|l| l.contains(marker)).unwrap_or_else(|| panic!("ARCHITECTURE.md has no line with {marker:?}"));
    line.split_once(marker).unwrap().1.replace('`', "")
}

/// The layers, lowest first (crate directory names, `crates/<name>`): the rule lives here, in
/// the test; ARCHITECTURE.md states the same, and `architecture_md_states_these_rules` checks it
/// (so an edit of the document cannot loosen the rule).
const LAYERS: &[&[&str]] = &[
    &["sys", "wire", "impair", "q3", "regulate", "testkit"],
    &["model"],
    &["proto", "stats", "topo"],
    &["engine", "emu", "fit"],
    &["scenario"],
    &["agent", "console"],
    &["cli"],
];

/// The crates that may open sockets or read the clock.
const IO_LAYER: &[&str] = &["sys", "engine", "emu", "agent", "console", "testkit"];

fn layers() -> Vec<BTreeSet<String>> {
    LAYERS.iter().map(|l| l.iter().map(|c| c.to_string()).collect()).collect()
}

fn io_layer() -> BTreeSet<String> {
    IO_LAYER.iter().map(|c| c.to_string()).collect()
}

#[test]
fn architecture_md_states_these_rules() {
    let stated_layers: Vec<BTreeSet<String>> = stated("Layers, lowest first:")
        .trim_end_matches('.')
        .split('<')
        .map(|group| group.split_whitespace().map(|w| w.trim_matches(',').to_string()).filter(|w| !w.is_empty()).collect())
        .collect();
    assert_eq!(stated_layers, layers(), "ARCHITECTURE.md's layer line differs from LAYERS in {}", file!());
    let stated_io: BTreeSet<String> =
        stated("Crates that may open sockets or read the clock:").trim_end_matches('.').split_whitespace().map(|w| w.trim_matches(',').to_string()).collect();
    assert_eq!(stated_io, io_layer(), "ARCHITECTURE.md's I/O line differs from IO_LAYER in {}", file!());
}

/// Crate directory names of the workspace, from the file system.
fn crate_dirs() -> Vec<String> {
    let mut dirs: Vec<String> = std::fs::read_dir(root().join("crates"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("Cargo.toml").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    dirs.sort();
    dirs
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().filter_map(|e| e.ok()) {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Where each text may appear in `crates/*/src` (outside `testkit`): our own binary is found
/// (`current_exe`) and started in one place, every child is armed by one `pre_exec`, and no
/// code builds `horde` arguments for our own processes or reads prefixed text lines back.
/// Plain text search, so nothing hides in a macro's body.
const ONE_WAY: &[(&str, &[&str])] = &[
    // `own.rs` starts this binary; `exec.rs` runs `horde` inside a node when none is on PATH (a
    // user's command, not ours); `procs.rs` only compares.
    ("current_exe()", &["crates/emu/src/exec.rs", "crates/emu/src/procs.rs", "crates/sys/src/own.rs"]),
    ("\"--progress\", \"json\"", &[]),
    ("pre_exec(", &["crates/sys/src/own.rs"]),
    ("serve-only", &[]),
    ("horde-serve:", &[]),
    ("HORDE_RUN_KEY", &[]),
    ("\"emu\", \"link\"", &[]),
    ("\"emu\", \"exec\"", &[]),
    ("\"emu\", \"daemon\"", &[]),
    ("\"emu\".into()", &[]),
];

#[test]
fn our_own_processes_start_one_way() {
    let mut wrong = Vec::new();
    for (text, allowed) in ONE_WAY {
        let mut found = BTreeSet::new();
        for c in crate_dirs().into_iter().filter(|c| c != "testkit") {
            for f in rust_files(&root().join("crates").join(&c).join("src")) {
                if std::fs::read_to_string(&f).unwrap().contains(text) {
                    found.insert(rel(&f.display().to_string()));
                }
            }
        }
        let allowed: BTreeSet<String> = allowed.iter().map(|s| s.to_string()).collect();
        if found != allowed {
            wrong.push(format!("`{text}` is in {found:?}; expected exactly {allowed:?} (see ONE_WAY in {})", file!()));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// One integration-test binary per crate (matklad's "Delete Cargo Integration Tests": link
/// once, run in parallel): `crates/X/tests/` holds `it/` and data, no other Rust file, and
/// every test that says it needs root (`horde_testkit::need_root`) lives under `it/root/`.
#[test]
fn one_integration_test_binary_per_crate() {
    let mut found = Vec::new();
    for c in crate_dirs() {
        let tests = root().join("crates").join(&c).join("tests");
        let Ok(rd) = std::fs::read_dir(&tests) else { continue };
        for e in rd.filter_map(|e| e.ok()) {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            let binary = (p.is_file() && name.ends_with(".rs")) || (p.is_dir() && name != "it" && p.join("main.rs").is_file());
            if binary {
                found.push(format!("crates/{c}/tests/{name}: a test binary of its own; make it a module of tests/it/main.rs"));
            }
        }
        for f in rust_files(&tests.join("it")) {
            let text = std::fs::read_to_string(&f).unwrap();
            let under_root = f.strip_prefix(tests.join("it")).is_ok_and(|r| r.starts_with("root"));
            if text.contains("need_root()") && !under_root && !f.ends_with("architecture.rs") {
                found.push(format!("{}: a test that needs root outside it/root/", rel(&f.display().to_string())));
            }
        }
    }
    assert!(found.is_empty(), "integration tests:\n{}", found.join("\n"));
}

fn parse(path: &Path) -> syn::File {
    let text = std::fs::read_to_string(path).unwrap();
    syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn dependencies_follow_the_layers() {
    let layers = layers();
    let layer_of = |dir: &str| layers.iter().position(|l| l.contains(dir));
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out =
        Command::new(cargo).args(["metadata", "--format-version", "1", "--no-deps", "--offline"]).current_dir(root()).output().expect("running cargo metadata");
    assert!(out.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&out.stderr));
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // Package name → directory name under crates/.
    let mut dir_of = BTreeMap::new();
    for p in meta["packages"].as_array().unwrap() {
        let manifest = PathBuf::from(p["manifest_path"].as_str().unwrap());
        let dir = manifest.parent().unwrap().file_name().unwrap().to_string_lossy().into_owned();
        dir_of.insert(p["name"].as_str().unwrap().to_string(), dir);
    }
    let mut problems = Vec::new();
    for dir in crate_dirs() {
        if layer_of(&dir).is_none() {
            problems.push(format!("crates/{dir} is in no layer of ARCHITECTURE.md's \"Layers, lowest first:\" line"));
        }
    }
    for p in meta["packages"].as_array().unwrap() {
        let me = &dir_of[p["name"].as_str().unwrap()];
        let Some(mine) = layer_of(me) else { continue };
        for d in p["dependencies"].as_array().unwrap() {
            if d["kind"].as_str().is_some() {
                continue; // dev- and build-dependencies may reach anywhere (tests drive the whole stack)
            }
            let Some(dep) = dir_of.get(d["name"].as_str().unwrap()) else { continue };
            match layer_of(dep) {
                Some(theirs) if theirs < mine => {}
                _ => problems.push(format!("crates/{me} (layer {mine}) depends on crates/{dep} (layer {:?}), not a lower layer", layer_of(dep))),
            }
        }
    }
    assert!(problems.is_empty(), "dependency order broken:\n{}", problems.join("\n"));
}

/// Files of the I/O layer's crates that are pure all the same — state machines and checks,
/// bytes and time in, actions out — and are checked one by one as a pure crate is.
const PURE_IN_THE_IO_LAYER: &[&str] = &[
    "crates/agent/src/session.rs",
    "crates/agent/src/msg.rs",
    "crates/agent/src/merge.rs",
    "crates/agent/src/flowsum.rs",
    "crates/console/src/hub.rs",
    "crates/console/src/guard.rs",
];

/// Paths whose use means opening a socket, reading a clock, waiting on one, or calling the
/// operating system directly. Above the I/O layer, time comes as an argument or as an injected
/// `horde_sys::clock::Clock` (its `real_ns` and `sleep` are methods, not these paths), and the
/// operating system through `horde_sys`.
const IO_PATHS: &[&str] = &[
    "UdpSocket",
    "TcpStream",
    "TcpListener",
    "UnixStream",
    "UnixListener",
    "UnixDatagram",
    "socket2",
    "mio",
    "Instant::now",
    "SystemTime::now",
    "libc",
    "clock::real_ns",
    "clock::mono_ns",
    "clock::unix_secs",
    "clock::wall_offset_ns",
    "clock::sleep_until",
    "clock::wait_until",
    "thread::sleep",
];

struct IoUses<'a> {
    file: &'a Path,
    found: Vec<String>,
}

impl IoUses<'_> {
    fn check(&mut self, text: &str, line: usize) {
        let words: Vec<&str> = text.split("::").map(str::trim).collect();
        for needle in IO_PATHS {
            let parts: Vec<&str> = needle.split("::").collect();
            if words.windows(parts.len()).any(|w| w == parts.as_slice()) {
                self.found.push(format!("{}:{line}: {text}", self.file.display()));
                return;
            }
        }
    }
}

impl<'ast> syn::visit::Visit<'ast> for IoUses<'_> {
    fn visit_path(&mut self, p: &'ast syn::Path) {
        let text = p.segments.iter().map(|s| s.ident.to_string()).collect::<Vec<_>>().join("::");
        self.check(&text, p.segments.first().map(|s| s.ident.span().start().line).unwrap_or(0));
        syn::visit::visit_path(self, p);
    }
    fn visit_use_tree(&mut self, t: &'ast syn::UseTree) {
        for (path, line) in use_paths(t, String::new()) {
            self.check(&path, line);
        }
    }
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if !is_test_module(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }
}

fn is_test_module(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| a.path().is_ident("cfg") && a.meta.require_list().is_ok_and(|l| l.tokens.to_string().contains("test")))
}

/// Every path a `use` tree brings in, with its line.
fn use_paths(t: &syn::UseTree, prefix: String) -> Vec<(String, usize)> {
    let join = |name: String| if prefix.is_empty() { name } else { format!("{prefix}::{name}") };
    match t {
        syn::UseTree::Path(p) => use_paths(&p.tree, join(p.ident.to_string())),
        syn::UseTree::Name(n) => vec![(join(n.ident.to_string()), n.ident.span().start().line)],
        syn::UseTree::Rename(r) => vec![(join(r.ident.to_string()), r.ident.span().start().line)],
        syn::UseTree::Glob(g) => vec![(join("*".into()), g.star_token.spans[0].start().line)],
        syn::UseTree::Group(g) => g.items.iter().flat_map(|i| use_paths(i, prefix.clone())).collect(),
    }
}

#[test]
fn only_the_io_layer_does_io() {
    let io = io_layer();
    assert!(io.contains("engine") && io.contains("sys"), "ARCHITECTURE.md's I/O layer line is malformed: {io:?}");
    let mut found = Vec::new();
    let pure_files = PURE_IN_THE_IO_LAYER.iter().map(|f| root().join(f));
    for file in crate_dirs().into_iter().filter(|d| !io.contains(d)).flat_map(|dir| rust_files(&root().join("crates").join(dir).join("src"))).chain(pure_files)
    {
        let mut v = IoUses { file: &file, found: Vec::new() };
        syn::visit::Visit::visit_file(&mut v, &parse(&file));
        found.extend(v.found);
    }
    ratchet(&format!("sockets, clocks, sleeps or libc outside the I/O layer ({io:?}); take them through horde-sys or an injected horde_sys::clock::Clock, or move the loop into the engine"), found, |f| {
        let (file, rest) = f.split_once(':').unwrap();
        let path = rest.split_once(": ").map_or(rest, |x| x.1);
        let what = IO_PATHS.iter().find(|w| path.contains(*w)).copied().unwrap_or(path);
        format!("{}: {what}", rel(file))
    });
}

/// The module path of a file: `src/a.rs` and `src/a/mod.rs` are `a`, `src/a/b.rs` is `a::b`;
/// `lib.rs` and `main.rs` are the root, the empty path.
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().trim_end_matches(".rs").to_string()).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts.join("::")
}

/// Whether one module contains the other (a parent and its children share a file tree and may
/// use each other's items: `super::Record`, `stats::Stats`; that is not a circle).
fn nested(a: &str, b: &str) -> bool {
    let within = |inner: &str, outer: &str| outer.is_empty() || inner == outer || inner.starts_with(&format!("{outer}::"));
    within(a, b) || within(b, a)
}

/// The crate's root re-exports (`pub use a::b::{X, Y}`): name → module path.
fn reexports(root_file: &syn::File) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for item in &root_file.items {
        if let syn::Item::Use(u) = item {
            for (path, _) in use_paths(&u.tree, String::new()) {
                let parts: Vec<&str> = path.split("::").collect();
                let parts = if matches!(parts.first(), Some(&"self" | &"crate")) { &parts[1..] } else { &parts[..] };
                if parts.len() >= 2 {
                    out.insert(parts[parts.len() - 1].to_string(), parts[..parts.len() - 1].join("::"));
                }
            }
        }
    }
    out
}

struct Imports<'a> {
    modules: &'a BTreeSet<String>,
    reexports: &'a BTreeMap<String, String>,
    /// The file's module path, as segments.
    module: Vec<String>,
    found: BTreeSet<String>,
}

impl Imports<'_> {
    fn resolve(&mut self, segments: &[String]) {
        let absolute: Vec<String> = match segments.first().map(String::as_str) {
            Some("crate") => segments[1..].to_vec(),
            Some("super") => {
                let supers = segments.iter().take_while(|s| *s == "super").count();
                let Some(keep) = self.module.len().checked_sub(supers) else { return };
                self.module[..keep].iter().chain(&segments[supers..]).cloned().collect()
            }
            _ => return,
        };
        // The longest prefix that names a module; else a root re-export.
        let target = (1..=absolute.len())
            .rev()
            .map(|n| absolute[..n].join("::"))
            .find(|m| self.modules.contains(m))
            .or_else(|| absolute.first().and_then(|f| self.reexports.get(f).cloned()));
        if let Some(t) = target {
            if !nested(&t, &self.module.join("::")) {
                self.found.insert(t);
            }
        }
    }
}

impl<'ast> syn::visit::Visit<'ast> for Imports<'_> {
    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segs: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        self.resolve(&segs);
        syn::visit::visit_path(self, p);
    }
    fn visit_use_tree(&mut self, t: &'ast syn::UseTree) {
        for (path, _) in use_paths(t, String::new()) {
            let segs: Vec<String> = path.split("::").map(String::from).collect();
            self.resolve(&segs);
        }
    }
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if !is_test_module(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }
    /// A macro's body is tokens, not syntax (`vec![crate::icmp::MAX; n]`): its `crate::…` and
    /// `super::…` paths are found in the tokens.
    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        for path in token_paths(m.tokens.clone()) {
            self.resolve(&path);
        }
        syn::visit::visit_macro(self, m);
    }
}

/// The `crate::a::b` and `super::a` paths in a token stream (inside groups too).
fn token_paths(tokens: proc_macro2::TokenStream) -> Vec<Vec<String>> {
    use proc_macro2::TokenTree;
    let flat: Vec<TokenTree> = tokens.into_iter().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < flat.len() {
        match &flat[i] {
            TokenTree::Group(g) => out.extend(token_paths(g.stream())),
            TokenTree::Ident(id) if *id == "crate" || *id == "super" => {
                let mut path = vec![id.to_string()];
                let mut j = i + 1;
                // `::` is two `:` puncts, then an identifier
                while j + 2 < flat.len() + 1 {
                    match (flat.get(j), flat.get(j + 1), flat.get(j + 2)) {
                        (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)), Some(TokenTree::Ident(next))) if a.as_char() == ':' && b.as_char() == ':' => {
                            path.push(next.to_string());
                            j += 3;
                        }
                        _ => break,
                    }
                }
                if path.len() > 1 {
                    out.push(path);
                }
                i = j;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

#[test]
fn paths_inside_macros_are_imports_too() {
    let tokens: proc_macro2::TokenStream = "0u8; if x { crate::icmp::MAX_PACKET } else { super::a::B }".parse().unwrap();
    assert_eq!(token_paths(tokens), vec![vec!["crate", "icmp", "MAX_PACKET"], vec!["super", "a", "B"]]);
}

/// The import graph of one crate's modules, one node per file (tests excluded; a module and the
/// modules inside it are not linked).
fn import_graph(dir: &str) -> BTreeMap<String, BTreeSet<String>> {
    let src = root().join("crates").join(dir).join("src");
    let files = rust_files(&src);
    let modules: BTreeSet<String> = files.iter().map(|f| module_of(&src, f)).filter(|m| !m.is_empty()).collect();
    let root_file = ["lib.rs", "main.rs"].iter().map(|n| src.join(n)).find(|p| p.is_file()).map(|p| parse(&p));
    let reexports = root_file.as_ref().map(reexports).unwrap_or_default();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let module = module_of(&src, file);
        if module.is_empty() {
            continue;
        }
        let segments = module.split("::").map(String::from).collect();
        let mut v = Imports { modules: &modules, reexports: &reexports, module: segments, found: BTreeSet::new() };
        syn::visit::Visit::visit_file(&mut v, &parse(file));
        graph.entry(module).or_default().extend(v.found);
    }
    graph
}

/// The circles of a graph: every strongly connected component with more than one node.
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let reach = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(n) = stack.pop() {
            for m in graph.get(&n).into_iter().flatten() {
                if seen.insert(m.clone()) {
                    stack.push(m.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> = graph.keys().map(|k| (k, reach(k))).collect();
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for k in graph.keys() {
        if done.contains(k) || !reaches[k].contains(k) {
            continue;
        }
        let scc: Vec<String> = graph.keys().filter(|m| reaches[k].contains(*m) && reaches[*m].contains(k)).cloned().collect();
        done.extend(scc.iter().cloned());
        out.push(scc);
    }
    out
}

#[test]
fn no_import_circles() {
    let mut found = Vec::new();
    for dir in crate_dirs() {
        for c in circles(&import_graph(&dir)) {
            found.push(format!("crates/{dir}: {}", c.join(" ↔ ")));
        }
    }
    ratchet("modules importing each other in a circle", found, |f| f.to_string());
}

#[test]
fn the_circle_finder_finds_circles() {
    // A negative control: the check above would pass vacuously if `circles` never found any.
    let g: BTreeMap<String, BTreeSet<String>> = [("a", vec!["b"]), ("b", vec!["c"]), ("c", vec!["a"]), ("d", vec!["a"])]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
        .collect();
    assert_eq!(circles(&g), vec![vec!["a".to_string(), "b".into(), "c".into()]]);
}

struct Functions<'a> {
    file: &'a Path,
    long: Vec<String>,
}

impl Functions<'_> {
    fn measure(&mut self, name: &syn::Ident, first: usize, last: usize) {
        let lines = last + 1 - first;
        if lines > MAX_FN_LINES {
            self.long.push(format!("{}:{first}: fn {name} is {lines} lines (at most {MAX_FN_LINES})", self.file.display()));
        }
    }
}

impl<'ast> syn::visit::Visit<'ast> for Functions<'_> {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.measure(&f.sig.ident, f.sig.fn_token.span.start().line, f.block.brace_token.span.close().end().line);
        syn::visit::visit_item_fn(self, f);
    }
    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.measure(&f.sig.ident, f.sig.fn_token.span.start().line, f.block.brace_token.span.close().end().line);
        syn::visit::visit_impl_item_fn(self, f);
    }
    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(b) = &f.default {
            self.measure(&f.sig.ident, f.sig.fn_token.span.start().line, b.brace_token.span.close().end().line);
        }
        syn::visit::visit_trait_item_fn(self, f);
    }
}

#[test]
fn files_and_functions_stay_small() {
    let mut found = Vec::new();
    for dir in crate_dirs() {
        for file in rust_files(&root().join("crates").join(&dir).join("src")) {
            let text = std::fs::read_to_string(&file).unwrap();
            let n = text.lines().count();
            if n > MAX_FILE_LINES {
                found.push(format!("{}: {n} lines (at most {MAX_FILE_LINES}); split it by purpose", file.display()));
            }
            let mut v = Functions { file: &file, long: Vec::new() };
            syn::visit::Visit::visit_file(&mut v, &parse(&file));
            found.extend(v.long);
        }
    }
    ratchet("too long", found, |f| {
        let file = rel(f.split(':').next().unwrap());
        match f.split_once(": fn ") {
            Some((_, rest)) => format!("{file}: fn {}", rest.split(' ').next().unwrap()),
            None => file,
        }
    });
}
