//! An agent's log against the exact schedule of each flow it holds, regenerated here from the
//! flow's seed (`horde_model::schedule`): the engine sends every departure of a schedule in
//! order and never drops one, so a sender's log holds a prefix of it — departure 0, 1, 2, …,
//! each once, each of its scheduled size, each at its scheduled instant from one common start —
//! and a receiver's log only departures of it, each of its scheduled size. One record that
//! breaks this (a departure added, removed, renumbered, resized or moved) refuses the agent's
//! log whole, naming the flow and the departure (issue 66: 400 forged departures in a flow of
//! 400 made a report of 50 % loss with exit code 0).
//!
//! Pure: records in, a verdict out.

use horde_model::flow::Flow;
use horde_model::schedule::Schedule;

/// How far a departure's scheduled instant may be from its schedule's, once the agent's start
/// is known from its first departure (the rounding of a clock correction).
pub const INSTANT_TOLERANCE_NS: i128 = 1_000;
/// How far that start may be from the run's common start (the agents' clock offsets' error).
pub const START_TOLERANCE_NS: i128 = 1_000_000_000;

/// Checks one flow's departures in a sender's log: `sent` as (sequence number, size, scheduled
/// instant on the controller's clock), in any order; `t0` the run's common start.
pub fn check_sent(f: &Flow, sent: &mut [(u64, u32, u64)], t0: u64) -> Result<(), String> {
    sent.sort_unstable();
    let mut schedule = Schedule::new(f);
    let mut start: Option<i128> = None;
    for (k, &(seq, size, at)) in sent.iter().enumerate() {
        let k = k as u64;
        if seq < k {
            return Err(format!("flow {}: departure {seq} is logged twice", f.id));
        }
        if seq > k {
            return Err(format!("flow {}: departure {k} is missing before departure {seq} (a sender logs every departure, in order)", f.id));
        }
        let Some(d) = schedule.next() else {
            return Err(format!("flow {}: departure {seq}, beyond the {k} its schedule has", f.id));
        };
        if d.size != size {
            return Err(format!("flow {}: departure {seq} of {size} B, where its schedule has {} B", f.id, d.size));
        }
        let s = at as i128 - d.at_ns as i128;
        match start {
            None if (s - t0 as i128).abs() > START_TOLERANCE_NS => {
                return Err(format!("flow {}: its schedule starts {:.3} s from the run's start", f.id, (s - t0 as i128) as f64 / 1e9));
            }
            None => start = Some(s),
            Some(s0) if (s - s0).abs() > INSTANT_TOLERANCE_NS => {
                return Err(format!("flow {}: departure {seq} is scheduled {:.3} ms from its schedule's instant", f.id, (s - s0) as f64 / 1e6));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// Checks one flow's arrivals in a receiver's log: `got` as (sequence number, size), in any
/// order (a packet may arrive twice: the network duplicates).
pub fn check_received(f: &Flow, got: &mut [(u64, u32)]) -> Result<(), String> {
    got.sort_unstable();
    let mut schedule = Schedule::new(f);
    let mut d = schedule.next();
    for &(seq, size) in got.iter() {
        while d.is_some_and(|x| x.seq < seq) {
            d = schedule.next();
        }
        match d {
            Some(x) if x.seq == seq && x.size != size => {
                return Err(format!("flow {}: an arrival of departure {seq} of {size} B, where its schedule has {} B", f.id, x.size));
            }
            Some(x) if x.seq == seq => {}
            _ => return Err(format!("flow {}: an arrival of departure {seq}, which its schedule does not have", f.id)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow() -> Flow {
        let text = "[[flow]]\ndst = \"127.0.0.1:9000\"\nidt = \"exponential(10)\"\nsize = \"uniform(40, 400)\"\npackets = 400\n";
        horde_model::flow::FlowFile::parse_and_resolve(text, 7).unwrap().remove(0)
    }

    /// A sender's departures as the check takes them.
    type Sent = Vec<(u64, u32, u64)>;

    fn honest(f: &Flow, t0: u64) -> Sent {
        Schedule::new(f).map(|d| (d.seq, d.size, t0 + d.at_ns)).collect()
    }

    #[test]
    fn an_honest_log_passes_and_every_lie_is_named() {
        let f = flow();
        let t0 = 1_700_000_000_000_000_000;
        let good = honest(&f, t0 + 300);
        assert_eq!(good.len(), 400);
        assert_eq!(check_sent(&f, &mut good.clone(), t0), Ok(()));
        assert_eq!(check_sent(&f, &mut good[..123].to_vec(), t0), Ok(()), "stopped early: a prefix");
        let lie = |edit: &dyn Fn(&mut Sent)| {
            let mut l = good.clone();
            edit(&mut l);
            check_sent(&f, &mut l, t0).unwrap_err()
        };
        assert!(lie(&|l| l.push((400, 100, t0 + 10))).contains("beyond the 400"), "one added at the end");
        assert!(lie(&|l| l.push(l[17])).contains("departure 17 is logged twice"), "one added twice");
        assert!(lie(&|l| {
            l.remove(50);
        })
        .contains("departure 50 is missing"));
        assert!(lie(&|l| l[9].1 += 1).contains("departure 9 of"), "resized");
        assert!(lie(&|l| l[9].2 += 5_000).contains("departure 9 is scheduled"), "moved");
        assert!(lie(&|l| l[9].0 = 10).contains("departure 9 is missing"), "renumbered");
        assert!(lie(&|l| l.iter_mut().for_each(|x| x.2 += 5_000_000_000)).contains("starts 5.000 s"), "another start");
        let mut got: Vec<(u64, u32)> = good.iter().map(|x| (x.0, x.1)).collect();
        got.push(got[3]);
        assert_eq!(check_received(&f, &mut got.clone()), Ok(()), "a duplicate arrival is the network's");
        got.push((400, 50));
        assert!(check_received(&f, &mut got).unwrap_err().contains("departure 400, which its schedule does not have"));
        let mut resized = vec![(5, good[5].1 + 1)];
        assert!(check_received(&f, &mut resized).unwrap_err().contains("departure 5 of"));
    }
}
