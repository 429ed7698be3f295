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
