#![no_main]
use horde_wire::log::read_all;
use libfuzzer_sys::fuzz_target;

// Any bytes as a log: records round-trip, endpoint records read back as they were written,
// and the whole analysis and the per-packet table of the log (as `decode --parquet` builds
// it) never panic, whatever the sequence numbers and times claim.
fuzz_target!(|data: &[u8]| {
    if let Ok((_, recs)) = read_all(data) {
        for r in recs.flatten() {
            let mut b = [0u8; 40];
            r.emit(&mut b);
            assert_eq!(horde_wire::Record::parse(&b).unwrap(), r);
            if let Some(e) = horde_wire::Endpoint::of(&r) {
                assert_eq!(horde_wire::Endpoint::of(&e.record()), Some(e));
            }
            if let Some(a) = horde_wire::log::Alias::of(&r) {
                assert_eq!(horde_wire::log::Alias::of(&a.record()), Some(a));
            }
        }
    }
    // Two logs at once (a receiver's alias records renaming a sender's flows): the bytes cut
    // where a second header may start.
    if let Some(cut) = data.windows(8).skip(1).position(|w| w == b"HORDELOG").map(|k| k + 1) {
        if let (Ok(a), Ok(b)) = (horde_stats::load(&data[..cut]), horde_stats::load(&data[cut..])) {
            let logs = [a, b];
            let c = horde_stats::collect(&logs);
            let _ = horde_stats::analyse_collected(&c, horde_stats::Options { window_ns: None, anchor_ns: None });
        }
    }
    if let Ok(log) = horde_stats::load(data) {
        let logs = [log];
        let c = horde_stats::collect(&logs);
        let a = horde_stats::analyse_collected(&c, horde_stats::Options { window_ns: Some(1_000_000_000), anchor_ns: None });
        let mut rows = 0u64;
        let _ = horde_stats::packets::rows::<horde_stats::packets::RowsError>(&c, |_| {
            rows += 1;
            // A table of millions of lost rows is valid but slow to fuzz: stop early.
            if rows > 100_000 {
                return Err(horde_stats::packets::RowsError::TooManyLost { flow: 0, lost: rows, limit: 100_000 });
            }
            Ok(())
        });
        let _ = horde_stats::export::table(&a, 20);
    }
});
