//! A flow run collected as summaries (`horde send --agents … --collect summaries`): what each
//! agent is asked for (its flows' other ends' clock offsets, the run's start and windows), how
//! many bytes its summary may have, and every summary checked against the placement before it
//! is merged ([`horde_stats::flowsum`]): an agent may summarise only the flows it sent or
//! received, with no more packets than the plan lets those flows have.

use std::path::PathBuf;

use anyhow::{bail, Context as _};
use horde_stats::flowsum::{Allowed, FlowSummaries};

use crate::fleet::Fleet;
use crate::msg::{SummaryRequest, FLOW_SUMMARIES};

/// Most ranges of flow ids with one peer offset a request may carry (a request is one control
/// message).
const MAX_PEER_RANGES: usize = 50_000;

/// Seconds after the flows' longest run that a window may still start at (the senders' overrun
/// bound, and the receivers' stop).
const WINDOW_MARGIN_NS: u64 = 120_000_000_000;

pub(crate) struct SummaryPlan<'a> {
    /// The flows' ids, in order, and the most packets each may log one way by the plan.
    pub flows: &'a [(u32, u64)],
    /// Per flow, its sending and receiving agent; and the agents' addresses.
    pub by_flow: &'a [(usize, usize)],
    pub addrs: &'a [std::net::SocketAddr],
    /// The run's start on the controller's clock: the windows count from it.
    pub t0: u64,
    pub window_ns: u64,
    /// The longest any flow may run.
    pub bound_ns: u64,
    /// Ask for the logs too, to check the summaries against them.
    pub with_logs: bool,
}

impl SummaryPlan<'_> {
    /// Agent `i`'s request: for each flow it sends or receives, the offset of the agent at the
    /// other end (a received packet carries its sender's send time).
    pub fn request(&self, i: usize, offsets: &[i64]) -> anyhow::Result<SummaryRequest> {
        let mut owners: Vec<(std::ops::Range<u32>, i64)> = Vec::new();
        for (&(id, _), &(s, r)) in self.flows.iter().zip(self.by_flow) {
            let peer = match (s == i, r == i) {
                (true, _) => offsets[r],
                (false, true) => offsets[s],
                _ => continue,
            };
            match owners.last_mut() {
                Some((range, off)) if range.end == id && *off == peer => range.end += 1,
                _ => owners.push((id..id + 1, peer)),
            }
        }
        if owners.len() > MAX_PEER_RANGES {
            bail!(
                "agent {} would need {} ranges of flow ids in its summary request (at most {MAX_PEER_RANGES}): collect with --collect logs",
                self.addrs[i],
                owners.len()
            );
        }
        Ok(SummaryRequest { epoch_ns: self.t0, own_offset_ns: offsets[i], server_offset_ns: 0, owners, window_ns: self.window_ns, with_logs: self.with_logs })
    }

    /// The most packets agent `i` may have logged of flow `id` in the given role (sending, or
    /// receiving): twice what the plan lets the flow log one way, as for its logs.
    fn packets(&self, i: usize, sender: bool, id: u32) -> Option<u64> {
        let k = self.flows.binary_search_by_key(&id, |f| f.0).ok()?;
        let (s, r) = self.by_flow[k];
        (if sender { s == i } else { r == i }).then(|| 2 * self.flows[k].1)
    }

    /// The most bytes agent `i`'s summaries may have: 1 MB, and per flow it has 512 KB for its
    /// histograms and 64 bytes per packet the plan allows (a loss burst's range, a window's run).
    pub fn bytes(&self, i: usize) -> u64 {
        let mine = self.flows.iter().zip(self.by_flow).filter(|(_, b)| b.0 == i || b.1 == i);
        mine.fold(1u64 << 20, |n, (f, _)| n.saturating_add(512 << 10).saturating_add(f.1.saturating_mul(2 * 64)))
    }

    /// Every collected agent's summaries, each checked against the plan; an agent whose
    /// summaries cannot be read or break the plan is refused whole (its name and why), as a
    /// refused log is: the others' flows are reported.
    pub fn load(&self, fleet: &Fleet, dirs: &[PathBuf]) -> (Vec<FlowSummaries>, Vec<(String, String)>) {
        let (mut out, mut refused) = (Vec::new(), Vec::new());
        for (i, m) in fleet.members.iter().enumerate().filter(|(_, m)| m.collected && m.ok()) {
            match self.load_one(i, m, &dirs[i]) {
                Ok(mut parts) => out.append(&mut parts),
                Err(e) => refused.push((m.c.name.clone(), format!("{e:#}"))),
            }
        }
        (out, refused)
    }

    fn load_one(&self, i: usize, m: &crate::fleet::Member, dir: &std::path::Path) -> anyhow::Result<Vec<FlowSummaries>> {
        let windows = (self.bound_ns + WINDOW_MARGIN_NS).checked_div(self.window_ns).map_or(0, |n| n + 1);
        let path = dir.join(FLOW_SUMMARIES);
        let text = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        let parts: Vec<FlowSummaries> = serde_json::from_slice(&text).context("its flow summaries")?;
        let mut roles = Vec::new();
        for s in &parts {
            let sender = s.role == "sender";
            if (if sender { !m.upstream } else { !m.downstream }) || roles.contains(&sender) {
                bail!("a summary of a {} log it does not have", s.role);
            }
            roles.push(sender);
            let packets = |id: u32| self.packets(i, sender, id);
            s.check(&Allowed { packets: &packets, window_ns: self.window_ns, anchor_ns: self.t0, windows })
                .with_context(|| format!("its {} summary", s.role))?;
        }
        Ok(parts)
    }
}
