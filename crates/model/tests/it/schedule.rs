//! Departure schedules: reproducibility, stop conditions, on/off periods and limits.

use horde_model::flow::{FlowFile, RawFlow};
use horde_model::{Flow, Schedule};

fn flow(extra: &str) -> Flow {
    let text = format!("[[flow]]\ndst = '127.0.0.1:9000'\n{extra}\n");
    FlowFile::parse_and_resolve(&text, 1).unwrap_or_else(|e| panic!("{e}")).remove(0)
}

#[test]
fn same_seed_same_schedule_and_different_seed_differs() {
    let a: Vec<_> = Schedule::new(&flow("idt = 'exponential(2)'\nsize = 'normal(300, 50)'\nseed = 42\npackets = 5000")).collect();
    let b: Vec<_> = Schedule::new(&flow("idt = 'exponential(2)'\nsize = 'normal(300, 50)'\nseed = 42\npackets = 5000")).collect();
    let c: Vec<_> = Schedule::new(&flow("idt = 'exponential(2)'\nsize = 'normal(300, 50)'\nseed = 43\npackets = 5000")).collect();
    assert_eq!(a.len(), 5000);
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn changing_the_size_model_keeps_departure_times() {
    let a: Vec<_> = Schedule::new(&flow("idt = 'exponential(2)'\nsize = 64\nseed = 5\npackets = 100")).map(|d| d.at_ns).collect();
    let b: Vec<_> = Schedule::new(&flow("idt = 'exponential(2)'\nsize = 'uniform(100, 300)'\nseed = 5\npackets = 100")).map(|d| d.at_ns).collect();
    assert_eq!(a, b);
}

#[test]
fn constant_rate_has_no_drift() {
    let d: Vec<_> = Schedule::new(&flow("rate = 3000\nsize = 64\nduration = '3s'")).collect();
    assert_eq!(d.len(), 9000);
    assert_eq!(d[8999].at_ns, (8999.0 * 1e9 / 3000.0) as u64);
}

#[test]
fn stop_by_bytes_truncates_the_last_packet() {
    let d: Vec<_> = Schedule::new(&flow("rate = 100\nsize = 100\nbytes = 1050")).collect();
    assert_eq!(d.len(), 11);
    assert_eq!(d.iter().map(|x| x.size as u64).sum::<u64>(), 1050);
    assert!(d[10].clamped && d[10].size == 50);
}

#[test]
fn sizes_are_clamped_to_the_transport_and_flagged() {
    let d: Vec<_> = Schedule::new(&flow("rate = 100\nsize = 5\npackets = 3")).collect();
    assert!(d.iter().all(|x| x.size == 20 && x.clamped), "UDP minimum is the 20-byte header");
    let d: Vec<_> = Schedule::new(&flow("rate = 100\nsize = 5\npackets = 3\ntransport = 'tcp'")).collect();
    assert!(d.iter().all(|x| x.size == 6 && x.clamped), "TCP minimum is the 6-byte APDU header");
}

#[test]
fn on_off_sends_only_in_on_periods() {
    // 10 ms on, 40 ms off, 1 packet/ms: about 20 % of a 1-packet/ms timeline.
    let d: Vec<_> = Schedule::new(&flow("rate = 1000\nsize = 64\non = 10\noff = 40\nduration = '10s'")).collect();
    assert!((1900..=2100).contains(&d.len()), "{}", d.len());
    for w in d.windows(2) {
        let gap = w[1].at_ns - w[0].at_ns;
        assert!(gap == 1_000_000 || gap >= 40_000_000, "gap {gap}");
    }
}

#[test]
fn start_delay_shifts_the_flow_and_the_duration() {
    let d: Vec<_> = Schedule::new(&flow("rate = 10\nsize = 64\nstart_delay = 500\nduration = '1s'")).collect();
    assert_eq!(d.len(), 10);
    assert_eq!(d[0].at_ns, 500_000_000);
}

#[test]
fn negative_idt_draws_go_back_to_back() {
    let f = flow("idt = 'normal(0, 1)'\nsize = 64\npackets = 1000");
    let mut s = Schedule::new(&f);
    let d: Vec<_> = s.by_ref().collect();
    assert!(d.windows(2).all(|w| w[1].at_ns >= w[0].at_ns));
    assert!(s.negative_idt > 400, "{}", s.negative_idt);
}

#[test]
fn cli_style_raw_flow_resolves() {
    let raw = RawFlow { dst: Some("[::1]:9000".into()), preset: Some("csi".into()), ..Default::default() };
    let f = raw.resolve(0, 1, "flow 1").unwrap();
    assert_eq!(Schedule::new(&f).take(10).count(), 10);
}

/// A flow retuned while it runs: the departure already drawn keeps its time; the one after it
/// is one new inter-departure time later, and so on; a size change applies to the next one.
#[test]
fn a_retuned_schedule_follows_the_new_law_from_the_next_draw() {
    use horde_model::dist::Dist;
    use horde_model::schedule::{Retune, Steered, Tuner};
    let tuner = Tuner::default();
    let mut s = Steered::new(Schedule::new(&flow("idt = 1\nsize = 100\nseed = 1\npackets = 100")), tuner.clone());
    let first: Vec<_> = (&mut s).take(3).map(|d| d.at_ns).collect();
    assert_eq!(first, [0, 1_000_000, 2_000_000]);
    *tuner.lock().unwrap() = Some(Retune { idt: Some(Dist::constant(0.2).sampler()), size: Some(Dist::constant(300.0).sampler()) });
    let next: Vec<_> = s.take(3).collect();
    assert_eq!(next.iter().map(|d| d.at_ns).collect::<Vec<_>>(), [2_200_000, 2_400_000, 2_600_000]);
    assert!(next.iter().all(|d| d.size == 300));
}
