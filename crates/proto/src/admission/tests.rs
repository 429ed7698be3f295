//! The admission policy against the attacks of issues 47 and 66, simulated on its own clock:
//! each attack runs for 16 s while a legitimate peer tries 20 times (a handshake of a few ms);
//! a try counts when it is admitted and not shed before it authenticates.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};

use super::*;

const MS: u64 = 1_000_000;

fn v4(a: u8, b: u8, c: u8, d: u8) -> IpAddr {
    IpAddr::from([a, b, c, d])
}

/// What happens in a simulated attack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// The attacker opens its `n`th connection.
    Attack(u64),
    /// A legitimate peer's `k`th try opens.
    Try(u64),
    /// Connection `id` ends as the attacker or the peer wants (`legit`: authenticates).
    End { id: Id, legit: bool, outcome: u8 },
}

struct Attack {
    /// Attacker connections a second.
    rate: u64,
    /// The `n`th attacker connection's source.
    source: fn(u64) -> IpAddr,
    /// When it ends after opening, and how (None: never, it holds its place until the
    /// listener's deadline of 3 s).
    ends: Option<(u64, Outcome)>,
    /// The legitimate peer's address, and how long its handshake takes.
    peer: IpAddr,
    handshake_ns: u64,
}

/// Runs an attack: (legitimate tries that got in, attacker connections admitted).
fn simulate(cfg: AdmissionConfig, at: Attack) -> (u32, u64) {
    let mut a = Admission::new(cfg);
    let mut q = BinaryHeap::new();
    let step = 1_000_000_000 / at.rate;
    q.push(Reverse((0u64, Ev::Attack(0))));
    for k in 0..20 {
        // the peer tries every 500 ms once the attack is 6 s old
        q.push(Reverse((6_000 * MS + k * 500 * MS + 7, Ev::Try(k))));
    }
    let (mut alive, mut ok, mut admitted) = (HashSet::new(), 0, 0);
    let code = |o: Outcome| [Outcome::Authenticated, Outcome::Answered, Outcome::TimedOut, Outcome::Closed].iter().position(|x| *x == o).unwrap() as u8;
    while let Some(Reverse((now, ev))) = q.pop() {
        match ev {
            Ev::Attack(n) => {
                if let Offer::Admit { id, evict } = a.offer((at.source)(n), now) {
                    admitted += 1;
                    if let Some(e) = evict {
                        alive.remove(&e);
                    }
                    alive.insert(id);
                    let (after, outcome) = at.ends.unwrap_or((3_000 * MS, Outcome::TimedOut));
                    q.push(Reverse((now + after, Ev::End { id, legit: false, outcome: code(outcome) })));
                }
                if now + step < 16_000 * MS {
                    q.push(Reverse((now + step, Ev::Attack(n + 1))));
                }
            }
            Ev::Try(_) => {
                if let Offer::Admit { id, evict } = a.offer(at.peer, now) {
                    if let Some(e) = evict {
                        alive.remove(&e);
                    }
                    alive.insert(id);
                    q.push(Reverse((now + at.handshake_ns, Ev::End { id, legit: true, outcome: 0 })));
                }
            }
            Ev::End { id, legit, outcome } => {
                if alive.remove(&id) {
                    ok += u32::from(legit);
                    a.finished(id, [Outcome::Authenticated, Outcome::Answered, Outcome::TimedOut, Outcome::Closed][outcome as usize], now);
                }
            }
        }
    }
    (ok, admitted)
}

fn agent() -> AdmissionConfig {
    AdmissionConfig::new(256, 8)
}

/// Connections that reset themselves just before the old 500-ms grace, 2,000 a second from
/// 256 addresses of one /24: the legitimate peer (another network) gets in every time.
#[test]
fn churn_from_many_addresses_does_not_lock_out() {
    let (ok, _) = simulate(
        agent(),
        Attack { rate: 2_000, source: |n| v4(127, 0, 1, n as u8), ends: Some((490 * MS, Outcome::Closed)), peer: v4(127, 0, 0, 1), handshake_ns: 5 * MS },
    );
    // each of the 256 addresses opens 8 a second, under a source's own rate: they are admitted
    // and displace each other (bench/lockout.sh measures what that costs the listener)
    assert_eq!(ok, 20);
}

/// The same churn from one address, the victim's own network (logd and /ready's row).
#[test]
fn churn_from_one_address_does_not_lock_out() {
    let (ok, _) = simulate(
        agent(),
        Attack { rate: 500, source: |_| v4(127, 0, 0, 9), ends: Some((490 * MS, Outcome::Closed)), peer: v4(127, 0, 0, 1), handshake_ns: 5 * MS },
    );
    assert!(ok >= 19, "{ok} of 20");
}

/// A fresh IPv4 address for every attempt, never closing, 500 a second (across /24s: no
/// network holds many of them).
#[test]
fn fresh_ipv4_addresses_do_not_lock_out() {
    let (ok, _) = simulate(
        agent(),
        Attack { rate: 500, source: |n| v4(10, (n >> 16) as u8, (n >> 8) as u8, n as u8), ends: None, peer: v4(127, 0, 0, 1), handshake_ns: 5 * MS },
    );
    assert_eq!(ok, 20);
    let (ok, _) = simulate(
        agent(),
        Attack { rate: 500, source: |n| v4(10, 9, (n % 251) as u8, (n / 251) as u8), ends: None, peer: v4(127, 0, 0, 1), handshake_ns: 5 * MS },
    );
    assert_eq!(ok, 20, "a /24 a connection, round robin");
}

/// A new IPv6 /64 for every attempt, never closing, 500 a second: within one /56 its network
/// is limited, and across /56s the youngest survive.
#[test]
fn fresh_ipv6_networks_do_not_lock_out() {
    for spread in [8u32, 40] {
        let source: fn(u64) -> IpAddr = if spread == 8 {
            |n| IpAddr::V6(std::net::Ipv6Addr::from(0x2001_0db8_0000_0000_u128 << 64 | u128::from(n as u8) << 64 | 1))
        } else {
            |n| IpAddr::V6(std::net::Ipv6Addr::from(0x2001_0db8_0000_0000_u128 << 64 | u128::from(n as u32) << 64 | 1))
        };
        let (ok, _) = simulate(agent(), Attack { rate: 500, source, ends: None, peer: v4(127, 0, 0, 1), handshake_ns: 5 * MS });
        assert_eq!(ok, 20, "spread {spread}");
    }
}

/// Penalty by proxy: silent connections from the victim's own address, timed out one after the
/// other to get it penalised (a few a second), do not shut the victim out.
#[test]
fn no_penalty_by_proxy() {
    let (ok, _) = simulate(
        agent(),
        Attack { rate: 4, source: |_| v4(127, 0, 0, 1), ends: Some((2_999 * MS, Outcome::TimedOut)), peer: v4(127, 0, 0, 1), handshake_ns: 5 * MS },
    );
    assert_eq!(ok, 20);
}

/// Idle or slow connections from the victim's own address (another local user), opened 50 a
/// second and never finishing: the source's own oldest make room for the victim.
#[test]
fn idle_connections_from_the_victims_address_do_not_lock_it_out() {
    let (ok, _) = simulate(agent(), Attack { rate: 50, source: |_| v4(127, 0, 0, 1), ends: None, peer: v4(127, 0, 0, 1), handshake_ns: 5 * MS });
    assert_eq!(ok, 20);
}

/// The old test's attack, 64 silent connections from 16 addresses against 16 places: a
/// newcomer finds a place at once (nothing has to age first).
#[test]
fn a_full_budget_of_young_silent_connections_makes_room() {
    let mut a = Admission::new(AdmissionConfig::new(16, 4));
    for k in 0..64u8 {
        let _ = a.offer(v4(127, 1, k % 16, 10), u64::from(k));
    }
    assert_eq!(a.counts(100).pending, 14, "all but the places reserved for trusted sources");
    let Offer::Admit { id, evict: Some(_) } = a.offer(v4(127, 0, 0, 2), 100 * MS) else { panic!("a newcomer must find a place") };
    a.finished(id, Outcome::Authenticated, 101 * MS);
    assert_eq!(a.counts(101 * MS).pending, 13, "an authenticated connection leaves the budget");
}

#[test]
fn strikes_penalise_only_when_repeated_and_trust_exempts() {
    let cfg = AdmissionConfig { source_strikes: 3, ..AdmissionConfig::new(16, 4) };
    let mut a = Admission::new(cfg);
    let x = v4(192, 0, 2, 1);
    let mut t = 0;
    for k in 0..2 {
        let Offer::Admit { id, .. } = a.offer(x, t) else { panic!() };
        a.finished(id, Outcome::TimedOut, t + 3_000 * MS);
        t += 3_001 * MS;
        assert_eq!(a.counts(t).penalised, 0, "strike {} alone penalises nothing", k + 1);
    }
    let Offer::Admit { id, .. } = a.offer(x, t) else { panic!() };
    a.finished(id, Outcome::Closed, t + MS);
    assert_eq!(a.counts(t + MS).penalised, 1, "the third strike penalises the source");
    // penalised: lower rate (5 a second, 10 at once), not refused outright
    let admitted = (0..30).filter(|k| matches!(a.offer(x, t + 2 * MS + k), Offer::Admit { .. })).count();
    assert_eq!(admitted, 10);
    // an address that authenticated is trusted: its strikes are not counted
    let y = v4(192, 0, 2, 7);
    let Offer::Admit { id, .. } = a.offer(y, t) else { panic!() };
    a.finished(id, Outcome::Authenticated, t);
    for k in 0..10 {
        let Offer::Admit { id, .. } = a.offer(y, t + k) else { panic!("a trusted source is not rate-limited") };
        a.finished(id, Outcome::TimedOut, t + k);
    }
    // answered without proof (a public page) is no strike
    let z = v4(198, 51, 100, 1);
    for k in 0..5 {
        let Offer::Admit { id, .. } = a.offer(z, t + k) else { panic!() };
        a.finished(id, Outcome::Answered, t + k);
    }
    assert_eq!(a.counts(t + 10).penalised, 1, "only x's source (y trusted, z answered)");
}

#[test]
fn an_exempt_network_is_trusted() {
    let cfg = AdmissionConfig::new(4, 4).exempting(vec![parse_exempt("10.1.0.0/16").unwrap()]);
    let mut a = Admission::new(cfg);
    for k in 0..4 {
        assert!(matches!(a.offer(v4(198, 51, 100, k), 0), Offer::Admit { .. }));
    }
    // the untrusted fill all but the reserved place (the fourth shed the first); an exempt
    // newcomer takes that place, the next sheds an untrusted one
    assert_eq!(a.counts(0).pending, 3);
    assert!(matches!(a.offer(v4(10, 1, 2, 3), 1), Offer::Admit { evict: None, .. }));
    assert!(matches!(a.offer(v4(10, 1, 9, 9), 1), Offer::Admit { evict: Some(_), .. }));
    assert!(matches!(a.offer(v4(198, 51, 100, 1), 2), Offer::Admit { evict: Some(_), .. }), "an untrusted newcomer sheds an untrusted one");
    assert_eq!(a.counts(2).pending, 4);
    assert_eq!(parse_exempt("::1").unwrap(), ("::1".parse().unwrap(), 128));
    assert!(parse_exempt("10.0.0.0/33").unwrap_err().contains("0..=32"));
    assert!(parse_exempt("host").unwrap_err().contains("not an address"));
}

#[test]
fn sources_are_hosts_and_networks_are_24s_and_56s() {
    let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
    let b: IpAddr = "2001:db8:1:2:bbbb::9".parse().unwrap();
    assert_eq!(source_of(a), source_of(b));
    assert_ne!(source_of(a), source_of("2001:db8:1:3::1".parse().unwrap()));
    assert_eq!(network_of(a), network_of("2001:db8:1:ff::1".parse().unwrap()), "one /56");
    assert_ne!(network_of(a), network_of("2001:db8:1:100::1".parse().unwrap()));
    assert_eq!(source_of("::ffff:127.0.0.9".parse().unwrap()), v4(127, 0, 0, 9));
    assert_eq!(network_of(v4(127, 0, 1, 77)), v4(127, 0, 1, 0));
}

/// Any sequence of connections, ends and times (a seeded stream of them): the budget, each
/// source's and network's share, the reserved places and what is remembered are never
/// exceeded, and a shed connection was pending.
#[test]
fn no_sequence_of_events_exceeds_the_bounds() {
    let cfg = AdmissionConfig { window_ns: 200 * MS, trust_ns: 400 * MS, ..AdmissionConfig::new(8, 3) };
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut a = Admission::new(cfg.clone());
    let mut live: Vec<(Id, IpAddr)> = Vec::new();
    let mut now = 0u64;
    for _ in 0..200_000 {
        now += next() % (5 * MS);
        let r = next();
        if r % 3 != 0 || live.is_empty() {
            let src = v4(10, 0, (r >> 8) as u8 % 3, (r >> 16) as u8 % 6);
            if let Offer::Admit { id, evict } = a.offer(src, now) {
                if let Some(e) = evict {
                    let k = live.iter().position(|l| l.0 == e).expect("a shed connection was pending");
                    live.swap_remove(k);
                }
                live.push((id, src));
            }
        } else {
            let k = (r >> 16) as usize % live.len();
            let outcome = [Outcome::Authenticated, Outcome::Answered, Outcome::TimedOut, Outcome::Closed][(r >> 32) as usize % 4];
            let (id, _) = live.swap_remove(k);
            a.finished(id, outcome, now);
        }
        let c = a.counts(now);
        assert_eq!(c.pending, live.len(), "pending as the listener sees them");
        assert!(live.len() <= cfg.pending);
        for (_, src) in &live {
            assert!(live.iter().filter(|l| l.1 == *src).count() <= cfg.per_source);
        }
        assert!(a.untrusted() <= cfg.pending);
        assert!(c.tracked <= 2 * MAX_TRACKED);
    }
}

#[test]
fn what_is_remembered_is_bounded() {
    let mut a = Admission::new(AdmissionConfig::new(2, 1));
    for k in 0..(3 * MAX_TRACKED as u32) {
        let src = IpAddr::from((0x0a00_0000 + (k << 8)).to_be_bytes());
        if let Offer::Admit { id, .. } = a.offer(src, u64::from(k)) {
            a.finished(id, if k % 2 == 0 { Outcome::TimedOut } else { Outcome::Authenticated }, u64::from(k));
        }
    }
    assert!(a.counts(0).tracked <= 2 * MAX_TRACKED, "{:?}", a.counts(0));
}
