//! The distributed control protocol: any bytes from a peer, split anywhere, through the frame
//! decoder (both directions' messages) and, as far as they decode, through the agent's session
//! state machine with arbitrary times. Nothing may panic; memory stays bounded by the frame
//! limit.
#![no_main]
use horde_agent::msg::{Decoder, Frame, ToAgent, ToController, MAX_FRAME};
use horde_agent::session::Session;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let split = (data[0] as usize).max(1);
    let body = &data[1..];
    let mut to_agent = Decoder::default();
    let mut to_ctl = Decoder::default();
    let mut s = Session::new(0, "1.0", "fuzz", 2);
    let mut now = 0u64;
    let mut agent_ok = true;
    let mut ctl_ok = true;
    for chunk in body.chunks(split) {
        now += chunk[0] as u64 * 10_000_000;
        if agent_ok {
            to_agent.push(chunk);
            loop {
                match to_agent.frame::<ToAgent>() {
                    Ok(Some(Frame::Msg(m))) => {
                        // a controller's part of a topology across machines: planned and split
                        // as the agent would, whatever its placement says
                        if let ToAgent::Emu(r) = &m {
                            if let horde_agent::msg::EmuRequest::Up { topology, file, part, .. } = r.as_ref() {
                                let _ = horde_agent::agent::emu::refuse_machine_files(topology, file, "fz0a");
                                if let Ok(mut p) = horde_topo::plan(topology, file, "fz0a") {
                                    let _ = horde_topo::partition::split(&mut p, part);
                                }
                            }
                        }
                        let _ = s.on_msg(now, m, |id| id.len() % 2 == 0);
                    }
                    Ok(Some(Frame::Log(p))) => assert!(p.len() < MAX_FRAME),
                    Ok(None) => break,
                    Err(_) => {
                        agent_ok = false;
                        break;
                    }
                }
            }
            assert!(to_agent.pending() <= horde_agent::msg::max_buffer() + split);
        }
        if ctl_ok {
            to_ctl.push(chunk);
            loop {
                match to_ctl.frame::<ToController>() {
                    Ok(Some(_)) => {}
                    Ok(None) => break,
                    Err(_) => {
                        ctl_ok = false;
                        break;
                    }
                }
            }
        }
        let _ = s.on_tick(now);
    }
    let _ = s.on_closed("end");
});
