//! A TCP connection's byte stream: what waits to be written, the decoder of what arrives, and
//! what a sink mirrors or sends back.

use horde_wire::{ApduHeader, StreamDecoder, StreamHello, HELLO_LEN};

use super::REVERSE_CONSENT_NS;
use crate::auth::RunKey;
use crate::gate::sign_stream_hello;

pub(super) struct Stream {
    pub(super) out: Vec<u8>,
    pub(super) sent_upto: usize,
    /// Base of the send-time offsets in our APDU headers (our hello's base).
    pub(super) base_ns: u64,
    pub(super) decoder: StreamDecoder,
    pub(super) broken: bool,
    /// Sink: mirror every byte back (the hello asked for it).
    pub(super) echo: bool,
    /// Server, sink: the peer's hello has not arrived yet.
    pub(super) awaiting_hello: bool,
    /// Bytes fed to the decoder so far.
    pub(super) fed: u64,
    /// Sink: the peer's hello, to mirror it byte for byte.
    pub(super) hello: Option<StreamHello>,
    /// Sink: the peer asked for bulk back (reverse mode).
    pub(super) reverse: Option<ReverseState>,
}

/// What a sink sends back to a reverse flow.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct ReverseState {
    /// APDU size: the first APDU's (0 until it arrives).
    pub(super) size: u16,
    /// Real time of the last keep-alive, ns: consent ends [`REVERSE_CONSENT_NS`] after it.
    pub(super) heard_ns: u64,
}

impl Stream {
    pub(super) fn new(awaiting_hello: bool) -> Stream {
        Stream {
            out: Vec::new(),
            sent_upto: 0,
            base_ns: 0,
            decoder: StreamDecoder::new(),
            broken: false,
            echo: false,
            awaiting_hello,
            fed: 0,
            hello: None,
            reverse: None,
        }
    }

    /// Queues our signed hello (`flags`, flow `flow` tagged `tag`), whose `base_ns` the send
    /// times of our APDUs count from.
    pub(super) fn queue_hello(&mut self, key: &RunKey, flags: u8, flow: u32, tag: u32, base_ns: u64) {
        let h = sign_stream_hello(key, StreamHello { flags, flow, base_ns, tag, mac: [0; 16] });
        self.base_ns = base_ns;
        let at = self.out.len();
        self.out.resize(at + HELLO_LEN, 0);
        h.emit(&mut self.out[at..]);
    }

    /// Queues an APDU of `size` bytes leaving at `real`.
    pub(super) fn queue_apdu(&mut self, size: u16, real: u64) {
        let at = self.out.len();
        self.out.resize(at + size as usize, 0);
        ApduHeader::at(size, self.base_ns, real).emit(&mut self.out[at..]);
    }

    /// `k` bytes of what waits were written.
    pub(super) fn wrote(&mut self, k: usize) {
        self.sent_upto += k;
        if self.sent_upto == self.out.len() {
            self.out.clear();
            self.sent_upto = 0;
        } else if self.sent_upto > 1 << 20 {
            self.out.drain(..self.sent_upto);
            self.sent_upto = 0;
        }
    }

    /// The stream cannot be written any more (the peer went away).
    pub(super) fn broke(&mut self) {
        self.broken = true;
        self.out.clear();
        self.sent_upto = 0;
    }

    /// Sink: whether a reverse flow should get more bulk at `now` (real ns): its size is known
    /// and its last keep-alive is less than [`REVERSE_CONSENT_NS`] old.
    pub(super) fn reverse_wanted(&self, now: u64) -> bool {
        self.reverse.filter(|_| !self.broken).is_some_and(|r| r.size > 0 && now.saturating_sub(r.heard_ns) < REVERSE_CONSENT_NS)
    }

    /// Sink: queues reverse APDUs stamped `now` until `limit` bytes wait; the APDUs and bytes.
    pub(super) fn fill_reverse(&mut self, now: u64, limit: usize) -> (u64, u64) {
        let size = self.reverse.map_or(0, |r| r.size);
        let (mut n, mut bytes) = (0, 0);
        while self.reverse_wanted(now) && self.out.len() - self.sent_upto < limit {
            self.queue_apdu(size, now);
            n += 1;
            bytes += size as u64;
        }
        (n, bytes)
    }

    /// Sink: the bytes of one read, mirrored back (`echoing`: it already mirrored before the
    /// read). A hello that asked for echoes and completed in this read (perhaps after earlier
    /// partial reads) is mirrored whole, then what followed it.
    pub(super) fn mirror(&mut self, bytes: &[u8], echoing: bool) {
        if echoing {
            self.out.extend_from_slice(bytes);
        } else if let Some(h) = self.hello.filter(|_| self.echo) {
            let after = (self.fed - HELLO_LEN as u64) as usize;
            let at = self.out.len();
            self.out.resize(at + HELLO_LEN, 0);
            h.emit(&mut self.out[at..]);
            self.out.extend_from_slice(&bytes[bytes.len() - after..]);
        }
    }
}
