//! A connected UDP socket reports an ICMP error once, on its next read, before the datagrams
//! queued behind it. Readiness is edge-triggered, so a read that stopped at the error left a
//! receiver's signed "stopping" message unread for seconds while its sender kept sending (seen
//! as 2,845 packets sent against a receiver that stopped after 2 s at 500 pkt/s).

use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::time::Duration;

use horde_engine::net::RecvBatch;

/// A client connected to a server that sent it `msg` and closed, after which the client sent
/// to the closed port: its socket holds a pending ECONNREFUSED and then `msg`.
fn refused_with_a_message_behind(msg: &[u8]) -> UdpSocket {
    let server = UdpSocket::bind("127.0.0.1:0").unwrap();
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    client.connect(server.local_addr().unwrap()).unwrap();
    server.send_to(msg, client.local_addr().unwrap()).unwrap();
    drop(server);
    client.send(b"x").unwrap(); // to a closed port: an ICMP port unreachable comes back
    std::thread::sleep(Duration::from_millis(20)); // loopback delivers it at once; margin only
    client
}

#[test]
fn a_pending_socket_error_does_not_hide_the_datagrams_behind_it() {
    let mut rx = RecvBatch::new(2048);
    // The kernel's order, which the plain read stops at:
    let plain = refused_with_a_message_behind(b"stopping");
    let first = rx.recv(plain.as_raw_fd()).expect_err("the error comes first");
    assert_eq!(first.kind(), std::io::ErrorKind::ConnectionRefused, "{first}");
    assert_eq!(rx.recv(plain.as_raw_fd()).unwrap(), 1, "then the datagram");
    // Reading past it gets the datagram in one call, then nothing more.
    let client = refused_with_a_message_behind(b"stopping");
    assert_eq!(rx.recv_queued(client.as_raw_fd()).unwrap(), 1);
    assert_eq!(rx.data(0), b"stopping");
    let empty = rx.recv_queued(client.as_raw_fd()).expect_err("nothing waits");
    assert_eq!(empty.kind(), std::io::ErrorKind::WouldBlock, "{empty}");
}

#[test]
fn a_socket_that_only_fails_is_read_a_bounded_number_of_times() {
    let mut rx = RecvBatch::new(2048);
    // not a socket at all: every read fails; the call still returns
    let file = std::fs::File::open("/dev/null").unwrap();
    let err = rx.recv_queued(file.as_raw_fd()).expect_err("not a socket");
    assert_ne!(err.kind(), std::io::ErrorKind::WouldBlock, "{err}");
}
