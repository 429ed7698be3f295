//! What a virtual-world server has to send one avatar, per channel, as the avatar's state
//! changes: trickles on land, wind and cloud, task updates that rise with movement, textures
//! and assets that arrive in bursts at login and after a teleport. Every number comes from the
//! service file's `[circuit]` table (crates/model/services/opensim.toml documents each).

use std::collections::BTreeMap;

use crate::channels::Channel;
use crate::rng::Rng;

/// An avatar's state, as the demand sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Avatar {
    Standing,
    Walking,
    Flying,
}

impl Avatar {
    pub fn name(self) -> &'static str {
        ["standing", "walking", "flying"][self as usize]
    }

    pub fn parse(s: &str) -> Option<Avatar> {
        match s {
            "standing" => Some(Avatar::Standing),
            "walking" => Some(Avatar::Walking),
            "flying" => Some(Avatar::Flying),
            _ => None,
        }
    }
}

/// The channels that carry demand (resend carries retransmissions only).
pub const DEMAND_CHANNELS: [Channel; 6] = [Channel::Land, Channel::Wind, Channel::Cloud, Channel::Task, Channel::Texture, Channel::Asset];

/// The demand model's numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct DemandModel {
    /// Mean rate per avatar state and demand channel, bit/s.
    pub rate_bps: [[f64; 6]; 3],
    /// Packet size per demand channel, bytes.
    pub packet: [u32; 6],
    /// Bursts queued at once at login and on arrival after a teleport: texture and asset bytes.
    pub login_bytes: [u64; 2],
    pub teleport_bytes: [u64; 2],
    /// Channels whose packets are reliable (acknowledged, resent on loss).
    pub reliable: [bool; 6],
}

/// The keys of a `[circuit]` table: `<state>_<channel>_kbps` (state standing/walking/flying,
/// channel land/wind/cloud/task/texture/asset), `<channel>_packet` (bytes),
/// `login_texture_kb`, `login_asset_kb`, `teleport_texture_kb`, `teleport_asset_kb`,
/// `<channel>_reliable` (0 or 1). Every key must be present; unknown keys are refused.
pub fn keys() -> Vec<String> {
    let mut k = Vec::new();
    for s in ["standing", "walking", "flying"] {
        for c in DEMAND_CHANNELS {
            k.push(format!("{s}_{}_kbps", c.name()));
        }
    }
    for c in DEMAND_CHANNELS {
        k.push(format!("{}_packet", c.name()));
        k.push(format!("{}_reliable", c.name()));
    }
    for b in ["login_texture_kb", "login_asset_kb", "teleport_texture_kb", "teleport_asset_kb"] {
        k.push(b.into());
    }
    k
}

impl DemandModel {
    /// From a service file's `[circuit]` table; errors name the key and what it must be.
    pub fn from_table(t: &BTreeMap<String, f64>) -> Result<DemandModel, String> {
        let known = keys();
        if let Some(k) = t.keys().find(|k| !known.contains(k)) {
            return Err(format!("[circuit]: unknown key `{k}` (known: {})", known.join(", ")));
        }
        let get = |k: &str, lo: f64, hi: f64| -> Result<f64, String> {
            let v = *t.get(k).ok_or_else(|| format!("[circuit]: `{k}` is missing"))?;
            if !(lo..=hi).contains(&v) {
                return Err(format!("[circuit]: `{k}` must be {lo}..={hi} (got {v})"));
            }
            Ok(v)
        };
        let mut m = DemandModel { rate_bps: [[0.0; 6]; 3], packet: [0; 6], login_bytes: [0; 2], teleport_bytes: [0; 2], reliable: [false; 6] };
        for (si, s) in ["standing", "walking", "flying"].iter().enumerate() {
            for (ci, c) in DEMAND_CHANNELS.iter().enumerate() {
                m.rate_bps[si][ci] = get(&format!("{s}_{}_kbps", c.name()), 0.0, 100_000.0)? * 1000.0;
            }
        }
        for (ci, c) in DEMAND_CHANNELS.iter().enumerate() {
            m.packet[ci] = get(&format!("{}_packet", c.name()), super::wire::DATA_MIN as f64, super::wire::DATA_MAX as f64)? as u32;
            m.reliable[ci] = get(&format!("{}_reliable", c.name()), 0.0, 1.0)? >= 0.5;
        }
        let kb = |k: &str| get(k, 0.0, 1e6).map(|v| (v * 1024.0) as u64);
        m.login_bytes = [kb("login_texture_kb")?, kb("login_asset_kb")?];
        m.teleport_bytes = [kb("teleport_texture_kb")?, kb("teleport_asset_kb")?];
        Ok(m)
    }

    /// The model's mean rate in a state, bit/s (bursts aside).
    pub fn state_bps(&self, a: Avatar) -> f64 {
        self.rate_bps[a as usize].iter().sum()
    }
}

/// What happens to the avatar, in order: `(t_ns, event)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Event {
    /// Login: the login burst, then this state.
    Login(Avatar),
    /// Teleport: the arrival burst, then this state.
    Teleport(Avatar),
    Become(Avatar),
}

/// One packet the server has to send.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Want {
    pub channel: Channel,
    pub size: u32,
    pub reliable: bool,
}

/// The demand of one avatar over time: Poisson packet arrivals per channel at the state's rate,
/// plus bursts; `backlog` channels are kept full (a saturating download, for experiments).
pub struct Demand {
    model: DemandModel,
    script: Vec<(u64, Event)>,
    next_event: usize,
    state: Option<Avatar>,
    next_ns: [u64; 6],
    rng: Rng,
    pub backlog: Vec<Channel>,
    /// The backlog's packet size (default: its channel's).
    pub backlog_packet: Option<u32>,
}

impl Demand {
    pub fn new(model: DemandModel, mut script: Vec<(u64, Event)>, seed: u64) -> Demand {
        script.sort_by_key(|e| e.0);
        Demand { model, script, next_event: 0, state: None, next_ns: [u64::MAX; 6], rng: Rng(seed), backlog: Vec::new(), backlog_packet: None }
    }

    pub fn state(&self) -> Option<Avatar> {
        self.state
    }

    /// Moves the script (times relative to the start) to start at `t0_ns`; call before the
    /// first [`Demand::due`].
    pub fn start_at(&mut self, t0_ns: u64) {
        for e in &mut self.script {
            e.0 = e.0.saturating_add(t0_ns);
        }
    }

    fn burst(&self, bytes: [u64; 2], out: &mut Vec<Want>) {
        for (k, ch) in [(4usize, Channel::Texture), (5, Channel::Asset)] {
            let size = self.model.packet[k];
            let n = bytes[k - 4].div_ceil(size as u64);
            out.extend((0..n).map(|_| Want { channel: ch, size, reliable: self.model.reliable[k] }));
        }
    }

    fn gap(&mut self, ci: usize) -> u64 {
        let Some(s) = self.state else { return u64::MAX };
        let bps = self.model.rate_bps[s as usize][ci];
        if bps <= 0.0 {
            return u64::MAX;
        }
        (self.rng.exp(self.model.packet[ci] as f64 * 8.0 / bps) * 1e9) as u64
    }

    /// The packets due by `now_ns`, appended to `out` (at most `max` of them, so a shell that
    /// fell behind catches up in bounded steps).
    pub fn due(&mut self, now_ns: u64, max: usize, out: &mut Vec<Want>) {
        while let Some(&(t, ev)) = self.script.get(self.next_event) {
            if t > now_ns {
                break;
            }
            self.next_event += 1;
            let s = match ev {
                Event::Login(s) => {
                    self.burst(self.model.login_bytes, out);
                    s
                }
                Event::Teleport(s) => {
                    self.burst(self.model.teleport_bytes, out);
                    s
                }
                Event::Become(s) => s,
            };
            self.state = Some(s);
            for ci in 0..6 {
                let g = self.gap(ci);
                self.next_ns[ci] = t.saturating_add(g);
            }
        }
        for (ci, &channel) in DEMAND_CHANNELS.iter().enumerate() {
            while self.next_ns[ci] <= now_ns && out.len() < max {
                out.push(Want { channel, size: self.model.packet[ci], reliable: self.model.reliable[ci] });
                let g = self.gap(ci);
                self.next_ns[ci] = self.next_ns[ci].saturating_add(g.max(1));
            }
        }
    }

    /// The next instant something is due.
    pub fn next_ns(&self) -> u64 {
        let ev = self.script.get(self.next_event).map_or(u64::MAX, |e| e.0);
        self.next_ns.iter().copied().min().unwrap_or(u64::MAX).min(ev)
    }

    pub fn packet_size(&self, c: Channel) -> u32 {
        DEMAND_CHANNELS.iter().position(|&x| x == c).map_or(1000, |i| self.model.packet[i])
    }
}

/// Parses a script: comma-separated `T:EVENT`, T in seconds, EVENT `login:STATE`,
/// `teleport:STATE` or a state (standing, walking, flying), e.g.
/// `0:login:standing,20:walking,40:teleport:flying`.
pub fn parse_script(s: &str) -> Result<Vec<(u64, Event)>, String> {
    let mut out = Vec::new();
    for item in s.split(',').map(str::trim).filter(|x| !x.is_empty()) {
        let mut parts = item.splitn(3, ':');
        let t: f64 = parts.next().unwrap_or("").parse().map_err(|_| format!("`{item}`: the time must be seconds, e.g. 20:walking"))?;
        if !(0.0..=7.0 * 86400.0).contains(&t) {
            return Err(format!("`{item}`: the time must be 0..=604800 s"));
        }
        let a = parts.next().unwrap_or("");
        let state = |x: Option<&str>| -> Result<Avatar, String> {
            let x = x.unwrap_or("");
            Avatar::parse(x).ok_or_else(|| format!("`{item}`: `{x}` is not a state (standing, walking, flying)"))
        };
        let ev = match a {
            "login" => Event::Login(state(parts.next())?),
            "teleport" => Event::Teleport(state(parts.next())?),
            other => Event::Become(state(Some(other))?),
        };
        out.push(((t * 1e9) as u64, ev));
    }
    if out.is_empty() {
        return Err("the script names no event: e.g. 0:login:standing,20:walking".into());
    }
    Ok(out)
}

/// A complete table with round numbers, for tests.
#[cfg(test)]
pub(crate) fn tests_table() -> BTreeMap<String, f64> {
    tests::table()
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn table() -> BTreeMap<String, f64> {
        let mut t = BTreeMap::new();
        for k in keys() {
            let v = if k.ends_with("_kbps") {
                50.0
            } else if k.ends_with("_packet") {
                500.0
            } else if k.ends_with("_reliable") {
                1.0
            } else {
                100.0
            };
            t.insert(k, v);
        }
        t
    }

    #[test]
    fn the_table_is_checked_key_by_key() {
        assert!(DemandModel::from_table(&table()).is_ok());
        let mut t = table();
        t.insert("flyin_task_kbps".into(), 1.0);
        assert!(DemandModel::from_table(&t).unwrap_err().contains("unknown key `flyin_task_kbps`"));
        let mut t = table();
        t.remove("walking_task_kbps");
        assert!(DemandModel::from_table(&t).unwrap_err().contains("`walking_task_kbps` is missing"));
        let mut t = table();
        t.insert("task_packet".into(), 9000.0);
        assert!(DemandModel::from_table(&t).unwrap_err().contains("task_packet"));
    }

    #[test]
    fn demand_follows_the_state_rates_and_bursts() {
        let m = DemandModel::from_table(&table()).unwrap();
        let script = parse_script("0:login:walking,100:teleport:flying").unwrap();
        let mut d = Demand::new(m.clone(), script, 3);
        let mut out = Vec::new();
        d.due(0, usize::MAX, &mut out);
        // The login burst: 100 KiB of textures and of assets in 500-byte packets.
        assert_eq!(out.len(), 2 * (100 * 1024usize).div_ceil(500));
        out.clear();
        d.due(99_999_999_999, usize::MAX, &mut out);
        let bytes: u64 = out.iter().map(|w| w.size as u64).sum();
        let expect = m.state_bps(Avatar::Walking) / 8.0 * 100.0;
        assert!((bytes as f64 / expect - 1.0).abs() < 0.05, "{bytes} vs {expect}");
        out.clear();
        d.due(100_000_000_000, usize::MAX, &mut out);
        assert!(out.len() >= 410, "the teleport burst");
        assert_eq!(d.state(), Some(Avatar::Flying));
        // Bounded catch-up.
        out.clear();
        d.due(10_000_000_000_000, 50, &mut out);
        assert_eq!(out.len(), 50);
    }

    #[test]
    fn scripts_are_parsed_and_bad_ones_named() {
        assert_eq!(
            parse_script("0:login:standing, 5:walking").unwrap(),
            vec![(0, Event::Login(Avatar::Standing)), (5_000_000_000, Event::Become(Avatar::Walking))]
        );
        assert!(parse_script("x:walking").unwrap_err().contains("seconds"));
        assert!(parse_script("3:swimming").unwrap_err().contains("swimming"));
        assert!(parse_script("").is_err());
        assert!(parse_script("3:teleport").unwrap_err().contains("not a state"));
    }

    #[test]
    fn the_opensim_service_carries_a_complete_circuit_table_matching_the_measurements() {
        let svc = horde_model::service::Service::builtin("opensim").unwrap();
        let m = DemandModel::from_table(&svc.circuit).unwrap();
        // Mongoose's Cathedral means: 189 / 253 / 434 kbit/s.
        for (a, kbps) in [(Avatar::Standing, 189.0), (Avatar::Walking, 253.0), (Avatar::Flying, 434.0)] {
            assert!((m.state_bps(a) / 1000.0 - kbps).abs() < 1e-9, "{}: {}", a.name(), m.state_bps(a));
        }
    }
}
