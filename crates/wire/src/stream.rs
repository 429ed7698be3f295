//! Framing of APDUs on a TCP byte stream.
//!
//! A stream starts with one hello, then carries APDUs back to back. An APDU of N bytes is
//! exactly N bytes on the stream: its first 6 bytes are its header, the rest padding.
//!
//! ```text
//! hello (36 bytes, once):
//!  0      2      3      4             8                          16           20           36
//!  +------+------+------+-------------+--------------------------+------------+------------+
//!  | 'HS' | ver  | flags| flow id u32 | base time, ns since epoch| tag u32    | MAC 16 B   |
//!  +------+------+------+-------------+--------------------------+------------+------------+
//! APDU header (6 bytes, at the start of every APDU):
//!  0             2                              6
//!  +-------------+------------------------------+
//!  | length u16  | send time, µs since base, u32 |   length = whole APDU, 6..=65535
//!  +-------------+------------------------------+
//! signal: an APDU header of length 0 (and offset 0), then a 60-byte signalling message
//! (`crate::signal`: the sender's end of flow); it is not an APDU and takes no sequence number.
//! ```
//! All big-endian. The µs offset wraps every 2^32 µs (71.6 min); APDUs on a stream are sent
//! in order, so the decoder unwraps it by counting wraps. The sequence number of an APDU is its
//! index on the stream. The 6-byte header is why the smallest TCP APDU is 6 bytes (the
//! smallest WoW APDU in the reference traces is 6 bytes too). The MAC authenticates bytes 0..20
//! with the run key (computed and checked by `horde-proto`; parsing only carries it).

use crate::{need, WireError, VERSION};

pub const HELLO_LEN: usize = 36;
/// The part of a hello its MAC covers.
pub const HELLO_SIGNED_LEN: usize = 20;
pub const APDU_HEADER_LEN: usize = 6;
pub const MAX_APDU: usize = u16::MAX as usize;
const MAGIC: [u8; 2] = *b"HS";

/// Hello flag: the receiver should mirror every byte of this stream back (round-trip mode).
pub const HELLO_ECHO: u8 = 0x01;
/// Hello flag: the receiver should send bulk back on this stream, APDUs the size of the first
/// one it gets, while the sender's keep-alive APDUs keep coming (reverse mode).
pub const HELLO_REVERSE: u8 = 0x02;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StreamHello {
    pub flags: u8,
    pub flow: u32,
    pub base_ns: u64,
    /// Free for the scenario layer (e.g. a player id); 0 when unused.
    pub tag: u32,
    /// Message authentication code over the first 20 bytes (see `horde_proto::auth`).
    pub mac: [u8; 16],
}

impl StreamHello {
    pub fn parse(buf: &[u8]) -> Result<Self, WireError> {
        need(buf, HELLO_LEN)?;
        if buf[0..2] != MAGIC {
            return Err(WireError::BadMagic);
        }
        if buf[2] != VERSION {
            return Err(WireError::Version(buf[2]));
        }
        Ok(StreamHello {
            flags: buf[3],
            flow: u32::from_be_bytes(buf[4..8].try_into().unwrap()),
            base_ns: u64::from_be_bytes(buf[8..16].try_into().unwrap()),
            tag: u32::from_be_bytes(buf[16..20].try_into().unwrap()),
            mac: buf[20..36].try_into().unwrap(),
        })
    }

    pub fn emit(&self, buf: &mut [u8]) {
        buf[..HELLO_SIGNED_LEN].copy_from_slice(&self.signed());
        buf[20..36].copy_from_slice(&self.mac);
    }

    /// The 20 bytes the MAC covers.
    pub fn signed(&self) -> [u8; HELLO_SIGNED_LEN] {
        let mut buf = [0u8; HELLO_SIGNED_LEN];
        buf[0..2].copy_from_slice(&MAGIC);
        buf[2] = VERSION;
        buf[3] = self.flags;
        buf[4..8].copy_from_slice(&self.flow.to_be_bytes());
        buf[8..16].copy_from_slice(&self.base_ns.to_be_bytes());
        buf[16..20].copy_from_slice(&self.tag.to_be_bytes());
        buf
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ApduHeader {
    pub len: u16,
    pub offset_us: u32,
}

impl ApduHeader {
    pub fn parse(buf: &[u8]) -> Result<Self, WireError> {
        need(buf, APDU_HEADER_LEN)?;
        let len = u16::from_be_bytes([buf[0], buf[1]]);
        if (len as usize) < APDU_HEADER_LEN {
            return Err(WireError::BadLength(len as usize));
        }
        Ok(ApduHeader { len, offset_us: u32::from_be_bytes(buf[2..6].try_into().unwrap()) })
    }

    pub fn emit(&self, buf: &mut [u8]) {
        buf[0..2].copy_from_slice(&self.len.to_be_bytes());
        buf[2..6].copy_from_slice(&self.offset_us.to_be_bytes());
    }

    /// The header for an APDU of `len` bytes sent at `send_ns`, on a stream based at `base_ns`.
    pub fn at(len: u16, base_ns: u64, send_ns: u64) -> Self {
        let us = send_ns.saturating_sub(base_ns) / 1000;
        ApduHeader { len, offset_us: us as u32 }
    }
}

/// What the decoder found in the bytes fed so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamEvent {
    Hello(StreamHello),
    /// One whole APDU has arrived.
    Apdu {
        seq: u64,
        len: u16,
        send_ns: u64,
    },
    /// The sender's end-of-flow message ([`crate::signal`]; its MAC is not checked here).
    End(crate::signal::FlowEnd),
    /// A signalling message of a version or type this build does not know: skipped.
    UnknownSignal {
        version: u8,
        kind: u8,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Hello,
    Header,
    Payload {
        remaining: usize,
    },
    /// After an APDU header of length 0: the signalling message's bytes.
    Signal,
    Failed(WireError),
}

/// Incremental, allocation-free decoder of one direction of a Horde TCP stream.
/// Feed it whatever `read` returned; it keeps partial headers across calls.
#[derive(Debug, Clone)]
pub struct StreamDecoder {
    state: State,
    partial: [u8; crate::signal::END_LEN],
    have: usize,
    hello: StreamHello,
    seq: u64,
    wraps: u64,
    last_offset: u32,
    pending: ApduHeader,
}

impl Default for StreamDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl StreamDecoder {
    pub fn new() -> Self {
        StreamDecoder {
            state: State::Hello,
            partial: [0; crate::signal::END_LEN],
            have: 0,
            hello: StreamHello::default(),
            seq: 0,
            wraps: 0,
            last_offset: 0,
            pending: ApduHeader::default(),
        }
    }

    pub fn hello(&self) -> Option<StreamHello> {
        (self.state != State::Hello).then_some(self.hello)
    }

    /// Consumes `buf`, calling `on_event` for each hello/APDU completed. After an error the
    /// decoder stays failed (the stream is not Horde's, or is corrupt) and returns the error.
    pub fn feed(&mut self, mut buf: &[u8], mut on_event: impl FnMut(StreamEvent)) -> Result<(), WireError> {
        while !buf.is_empty() {
            match self.state {
                State::Failed(e) => return Err(e),
                State::Hello | State::Header | State::Signal => {
                    let want = match self.state {
                        State::Hello => HELLO_LEN,
                        State::Signal => crate::signal::END_LEN,
                        _ => APDU_HEADER_LEN,
                    };
                    let take = (want - self.have).min(buf.len());
                    self.partial[self.have..self.have + take].copy_from_slice(&buf[..take]);
                    self.have += take;
                    buf = &buf[take..];
                    if self.have == want {
                        self.have = 0;
                        let r = self.header_complete(want, &mut on_event);
                        if let Err(e) = r {
                            self.state = State::Failed(e);
                            return Err(e);
                        }
                    }
                }
                State::Payload { remaining } => {
                    let take = remaining.min(buf.len());
                    buf = &buf[take..];
                    self.finish_payload(remaining - take, &mut on_event);
                }
            }
        }
        Ok(())
    }

    fn header_complete(&mut self, want: usize, on_event: &mut impl FnMut(StreamEvent)) -> Result<(), WireError> {
        if self.state == State::Hello {
            self.hello = StreamHello::parse(&self.partial[..HELLO_LEN])?;
            self.state = State::Header;
            on_event(StreamEvent::Hello(self.hello));
            return Ok(());
        }
        if self.state == State::Signal {
            self.state = State::Header;
            match crate::signal::FlowEnd::parse(&self.partial[..want]) {
                Ok(e) => on_event(StreamEvent::End(e)),
                Err(crate::signal::SignalError::Unknown { version, kind }) => on_event(StreamEvent::UnknownSignal { version, kind }),
                Err(crate::signal::SignalError::Wire(e)) => return Err(e),
            }
            return Ok(());
        }
        if self.partial[..2] == [0, 0] {
            // Length 0: a signalling message follows, not an APDU (it takes no sequence number).
            self.state = State::Signal;
            return Ok(());
        }
        let h = ApduHeader::parse(&self.partial[..APDU_HEADER_LEN])?;
        if h.offset_us < self.last_offset && self.last_offset - h.offset_us > u32::MAX / 2 {
            self.wraps += 1;
        }
        self.last_offset = h.offset_us;
        self.pending = h;
        self.finish_payload(h.len as usize - APDU_HEADER_LEN, on_event);
        Ok(())
    }

    fn finish_payload(&mut self, remaining: usize, on_event: &mut impl FnMut(StreamEvent)) {
        if remaining > 0 {
            self.state = State::Payload { remaining };
            return;
        }
        // The hello's base comes from the peer: a hostile one near u64::MAX saturates rather
        // than overflows (the time is then absurd, which the analysis shows, not a panic).
        let us = (self.wraps << 32).saturating_add(self.pending.offset_us as u64);
        let send_ns = self.hello.base_ns.saturating_add(us.saturating_mul(1000));
        on_event(StreamEvent::Apdu { seq: self.seq, len: self.pending.len, send_ns });
        self.seq += 1;
        self.state = State::Header;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signal_between_apdus_is_an_event_not_an_apdu_in_any_split() {
        let hello = StreamHello { flags: 0, flow: 4, base_ns: 1_000_000, tag: 0, mac: [0; 16] };
        let mut bytes = vec![0u8; HELLO_LEN];
        hello.emit(&mut bytes);
        let mut apdu = [0u8; 10];
        ApduHeader::at(10, 1_000_000, 3_000_000).emit(&mut apdu);
        bytes.extend_from_slice(&apdu);
        let end = crate::signal::FlowEnd { ack: false, flow: 4, reason: crate::signal::EndReason::Done, packets: 2, bytes: 20, at_ns: 9, mac: [1; 16] };
        bytes.extend_from_slice(&[0; APDU_HEADER_LEN]);
        bytes.extend_from_slice(&end.emit());
        let mut unknown = end.emit();
        unknown[20] = 7;
        bytes.extend_from_slice(&[0; APDU_HEADER_LEN]);
        bytes.extend_from_slice(&unknown);
        bytes.extend_from_slice(&apdu);
        for split in 1..bytes.len() {
            let mut d = StreamDecoder::new();
            let mut ev = Vec::new();
            d.feed(&bytes[..split], |e| ev.push(e)).unwrap();
            d.feed(&bytes[split..], |e| ev.push(e)).unwrap();
            assert_eq!(ev.len(), 5, "split {split}");
            assert_eq!(ev[2], StreamEvent::End(end));
            assert_eq!(ev[3], StreamEvent::UnknownSignal { version: 7, kind: 1 });
            assert!(matches!(ev[4], StreamEvent::Apdu { seq: 1, len: 10, .. }), "a signal takes no sequence number");
        }
    }

    fn stream(lens: &[u16], offsets: &[u32]) -> Vec<u8> {
        let mut v = vec![0u8; HELLO_LEN];
        StreamHello { flags: 0, flow: 7, base_ns: 1_000_000_000, tag: 3, mac: [9; 16] }.emit(&mut v);
        for (l, o) in lens.iter().zip(offsets) {
            let mut a = vec![0xAAu8; *l as usize];
            ApduHeader { len: *l, offset_us: *o }.emit(&mut a);
            v.extend(a);
        }
        v
    }

    #[test]
    fn decodes_byte_by_byte_and_whole() {
        let bytes = stream(&[6, 36, 1460, 7300], &[0, 10, 20, 30]);
        for chunk in [1usize, 5, 7, bytes.len()] {
            let mut d = StreamDecoder::new();
            let mut ev = Vec::new();
            for c in bytes.chunks(chunk) {
                d.feed(c, |e| ev.push(e)).unwrap();
            }
            assert_eq!(ev.len(), 5, "chunk {chunk}");
            assert_eq!(ev[0], StreamEvent::Hello(StreamHello { flags: 0, flow: 7, base_ns: 1_000_000_000, tag: 3, mac: [9; 16] }));
            assert_eq!(ev[4], StreamEvent::Apdu { seq: 3, len: 7300, send_ns: 1_000_030_000 });
        }
    }

    #[test]
    fn unwraps_microsecond_offsets() {
        let bytes = stream(&[6, 6], &[u32::MAX - 5, 4]);
        let mut d = StreamDecoder::new();
        let mut ev = Vec::new();
        d.feed(&bytes, |e| ev.push(e)).unwrap();
        let StreamEvent::Apdu { send_ns, .. } = ev[2] else { panic!() };
        assert_eq!(send_ns, 1_000_000_000 + ((1u64 << 32) + 4) * 1000);
    }

    #[test]
    fn fails_on_garbage_and_stays_failed() {
        let mut d = StreamDecoder::new();
        assert_eq!(d.feed(&[0x55; 40], |_| {}), Err(WireError::BadMagic));
        assert_eq!(d.feed(&[0x55; 4], |_| {}), Err(WireError::BadMagic));
        let mut bytes = stream(&[6], &[0]);
        bytes[HELLO_LEN + 1] = 2; // length 2 < header
        let mut d = StreamDecoder::new();
        assert_eq!(d.feed(&bytes, |_| {}), Err(WireError::BadLength(2)));
    }

    #[test]
    fn a_hostile_base_time_saturates_instead_of_overflowing() {
        // Found by the fuzzer (stream_decoder): a hello whose base is near u64::MAX.
        let mut v = vec![0u8; HELLO_LEN];
        StreamHello { flags: 0, flow: 7, base_ns: u64::MAX - 10, tag: 3, mac: [9; 16] }.emit(&mut v);
        let mut a = vec![0u8; 6];
        ApduHeader { len: 6, offset_us: u32::MAX }.emit(&mut a);
        v.extend(a);
        let mut ev = Vec::new();
        StreamDecoder::new().feed(&v, |e| ev.push(e)).unwrap();
        assert_eq!(ev[1], StreamEvent::Apdu { seq: 0, len: 6, send_ns: u64::MAX });
    }
}
