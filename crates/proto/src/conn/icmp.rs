//! A client flow over ICMP: its requests leave only while the target's echo replies keep its
//! consent ([`crate::echo`]); with `meter = "rtt"` the replies are its round trips.

use std::net::IpAddr;

use horde_model::Meter;
use horde_wire::{Record, RecordKind};

use super::{datagram_record, Conn, RxMeta};
use crate::echo::{EchoConsent, Reply};

impl Conn {
    /// Makes this client flow an ICMP one whose consent `c` keeps.
    pub fn set_echo_consent(&mut self, c: EchoConsent) {
        self.echo = Some(c);
    }

    pub fn echo_consent(&self) -> Option<&EchoConsent> {
        self.echo.as_ref()
    }

    pub fn echo_consent_mut(&mut self) -> Option<&mut EchoConsent> {
        self.echo.as_mut()
    }

    /// An echo reply's payload from `from`, read at `now` (real ns): its log record if it
    /// answers one of this flow's requests and the flow measures round trips. Any verified
    /// reply refreshes consent; anything else is ignored.
    pub fn on_echo_reply(&mut self, now: u64, from: IpAddr, payload: &[u8], meta: &RxMeta) -> Option<Record> {
        match self.echo.as_mut()?.on_reply(from, payload)? {
            Reply::Data(h) if self.meter == Meter::Rtt => {
                self.stats.echo(now.saturating_sub(h.send_ns));
                Some(datagram_record(&h, &RxMeta { len: payload.len(), ..*meta }, now, self.tag, RecordKind::Echoed))
            }
            _ => None,
        }
    }
}
