//! A two-way UDP player whose first hello is lost (nobody listening yet) is still served: the
//! client repeats its hello until the server answers.

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use horde_engine::sender::{self, Accepted, Job, Responder, Source};
use horde_engine::SendOptions;
use horde_model::flow::RawFlow;
use horde_model::{Flow, Schedule, Transport};
use horde_wire::control::Status;

fn flow(dst: &str, rate: &str) -> Flow {
    let raw = RawFlow { dst: Some(dst.into()), rate: Some(rate.into()), size: Some("100".into()), duration: Some("2s".into()), ..Default::default() };
    raw.resolve(0, 1, "test").unwrap()
}

struct Echoing {
    down: Flow,
    up: Flow,
}

impl Responder for Echoing {
    fn on_hello(&self, _flow: u32, tag: u32) -> Result<Accepted, Status> {
        let source: Source = Box::new(Schedule::new(&self.down));
        let mirror: Source = Box::new(Schedule::new(&self.up));
        Ok(Accepted { source, mirror: Some(mirror), tag, presence: None })
    }
}

#[test]
fn a_lost_hello_is_repeated_until_the_server_answers() {
    let _share = horde_testkit::share(horde_testkit::Load::Light);
    let port = UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let dst = format!("127.0.0.1:{port}");
    let up = flow(&dst, "50");
    let down = flow(&dst, "100");
    let responder: Arc<dyn Responder> = Arc::new(Echoing { down: down.clone(), up: up.clone() });
    let server_stop = AtomicBool::new(false);
    let client_stop = AtomicBool::new(false);
    let (server, client) = std::thread::scope(|s| {
        let server = s.spawn(|| {
            // Nobody listens for the first 300 ms: the client's first hellos are refused.
            std::thread::sleep(Duration::from_millis(300));
            let opts = SendOptions { responder: Some(responder.clone()), ..Default::default() };
            sender::serve(&[dst.parse().unwrap()], Transport::Udp, &opts, &server_stop, |_| {})
        });
        let job = Job { flow: up.clone(), source: None, mirror: Some(Box::new(Schedule::new(&down))), connect_at_ns: None, netns: None, presence: None };
        let copts = SendOptions { run_for: Some(Duration::from_secs(2)), linger: Duration::from_millis(300), ..Default::default() };
        let client = sender::run_jobs(vec![job], &copts, &client_stop).unwrap();
        server_stop.store(true, Ordering::Relaxed);
        (server.join().unwrap().unwrap(), client)
    });
    assert_eq!(server.flows.len(), 1, "the player was created by a repeated hello");
    assert!(client.received > 100, "the server's datagrams reached the client: {}", client.received);
    assert_eq!(client.mismatched + server.mismatched, 0);
}
