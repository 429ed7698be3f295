//! The library end to end, as `bench/fit.sh` uses it until `horde fit` exists (the subcommand
//! waits on the freeze of the CLI; docs/fit.md):
//!
//! ```sh
//! cargo run -p horde-fit --release --example fit -- CAPTURE [--server ADDR:PORT[/udp|/tcp]]
//!     [--states LABELS.csv | --guess-states] [--tcp-gap-ms MS] [--name NAME] [--out SERVICE.toml]
//!     [--json FIT.json] [--html DIR] [--compare OTHER_CAPTURE] [--against SERVICE]
//!     [--compare-json CMP.json]
//! ```

use std::fs::File;
use std::io::BufReader;
use std::process::ExitCode;

use horde_fit::apdu::parse_server;
use horde_fit::samples::Labels;
use horde_fit::{against, collect, compare, report, service, Options};
use horde_model::service::Service;

fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Vec<String>) -> Result<(), String> {
    let mut it = args.into_iter();
    let mut capture = None;
    let mut opts = Options::default();
    let (mut name, mut out, mut json, mut other, mut cmp_json) = ("fitted".to_string(), None, None, None, None);
    let mut model: Option<String> = None;
    let mut html_dir: Option<String> = None;
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or(format!("{a} needs a value"));
        if a == "--guess-states" {
            opts.guess_states = true;
            continue;
        }
        match a.as_str() {
            "--server" => opts.server = Some(parse_server(&value()?)?),
            "--states" => {
                let path = value()?;
                let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
                opts.labels = Some(Labels::parse(&text)?);
            }
            "--tcp-gap-ms" => opts.tcp_gap_ms = value()?.parse().map_err(|_| "--tcp-gap-ms: a number of milliseconds")?,
            "--name" => name = value()?,
            "--out" => out = Some(value()?),
            "--json" => json = Some(value()?),
            "--html" => html_dir = Some(value()?),
            "--compare" => other = Some(value()?),
            "--against" => model = Some(value()?),
            "--compare-json" => cmp_json = Some(value()?),
            _ if capture.is_none() && !a.starts_with("--") => capture = Some(a),
            _ => return Err(format!("unknown argument {a:?}")),
        }
    }
    let capture = capture.ok_or("name a capture (pcap or pcapng)")?;
    let open = |path: &str| {
        let path = path.to_string();
        move || File::open(&path).map(|f| BufReader::with_capacity(1 << 20, f))
    };
    let a = collect(open(&capture), &opts).map_err(|e| format!("{capture}: {e}"))?;
    let r = report(&a, &opts);
    for d in &r.directions {
        for (what, f) in [("idt", &d.idt), ("size", &d.size)] {
            if let Some(f) = f {
                println!(
                    "{:<10} {:<4} {:<4} {:<60} KS {:.4} [{:.4}] n {}",
                    d.state,
                    format!("{:?}", d.direction).to_lowercase(),
                    what,
                    f.dist,
                    f.ks,
                    f.ks_critical,
                    f.n
                );
            }
        }
    }
    for n in &r.notes {
        println!("note: {n}");
    }
    if let Some(path) = out {
        std::fs::write(&path, service::service_toml(&r, &name, &capture)).map_err(|e| format!("{path}: {e}"))?;
    }
    if let Some(dir) = html_dir {
        std::fs::create_dir_all(&dir).map_err(|e| format!("{dir}: {e}"))?;
        let path = format!("{dir}/index.html");
        std::fs::write(&path, horde_fit::html::page(&r, &a, &capture)).map_err(|e| format!("{path}: {e}"))?;
    }
    if let Some(path) = json {
        std::fs::write(&path, serde_json::to_string_pretty(&r).unwrap() + "\n").map_err(|e| format!("{path}: {e}"))?;
    }
    let mut rows = Vec::new();
    if let Some(other) = other {
        let b = collect(open(&other), &Options { server: None, ..opts.clone() }).map_err(|e| format!("{other}: {e}"))?;
        rows.extend(compare(&a, &b));
    }
    if let Some(m) = model {
        let s = Service::load(&m).map_err(|e| e.to_string())?;
        rows.extend(against(&a, &s)?);
    }
    {
        for c in &rows {
            let dir = format!("{:?}", c.direction).to_lowercase();
            let means = format!("mean {:.2} / {}", c.mean_a, c.mean_b.map_or("-".into(), |m| format!("{m:.2}")));
            println!(
                "compare {:<10} {dir:<4} {:<4} KS {:.4} [{:.4}] n {} / {} {means} {}",
                c.state,
                c.what,
                c.ks,
                c.ks_critical,
                c.n_a,
                c.n_b,
                if c.alike { "alike" } else { "DIFFERENT" }
            );
        }
        if let Some(path) = cmp_json {
            std::fs::write(&path, serde_json::to_string_pretty(&rows).unwrap() + "\n").map_err(|e| format!("{path}: {e}"))?;
        }
    }
    Ok(())
}
