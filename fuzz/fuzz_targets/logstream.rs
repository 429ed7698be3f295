#![no_main]
use libfuzzer_sys::fuzz_target;

use horde_agent::logd::{SourceLog, Step};
use horde_wire::logstream::{FrameDecoder, LogAnswer, LogHello};

// Any bytes as what a source sends a log server after its hello (split where the first byte
// says), and as a hello and an answer: nothing panics, a hello or answer that parses
// round-trips, the log the server writes never passes its size limit and always reads as a log.
fuzz_target!(|data: &[u8]| {
    if let Ok(h) = LogHello::parse(data) {
        assert_eq!(LogHello::parse(&h.emit()), Ok(h));
    }
    if let Ok(a) = LogAnswer::parse(data) {
        assert_eq!(LogAnswer::parse(&a.emit()), Ok(a));
    }
    let Some((&split, rest)) = data.split_first() else { return };
    let max = 32 + 40 * 64;
    let mut log = SourceLog::new(Vec::new(), max);
    let mut dec = FrameDecoder::new();
    let cut = (split as usize).min(rest.len());
    'feed: for part in [&rest[..cut], &rest[cut..]] {
        dec.feed(part);
        loop {
            match dec.next_frame() {
                Ok(Some(f)) => match log.on_frame(f, 1) {
                    Step::Go => {}
                    Step::Ack(_) | Step::Broken => break 'feed,
                },
                Ok(None) => break,
                Err(_) => break 'feed,
            }
        }
    }
    log.lost(horde_wire::log::GapReason::Lost);
    let r = log.report();
    let out = log.into_inner();
    assert!(out.len() as u64 <= max, "{} > {max}", out.len());
    if !out.is_empty() {
        let l = horde_stats::load(&out).expect("the server writes a log");
        assert_eq!(l.records.iter().filter(|x| x.kind != horde_wire::RecordKind::Gap).count() as u64, r.records);
    }
});
