//! Accepting TCP connections when descriptors may run out. With edge-triggered polling, an
//! `accept` that fails with EMFILE leaves the connection in the backlog with no new event to
//! retry it, and a level-triggered loop would spin. The classic remedy: hold one descriptor in
//! reserve; when out of descriptors, give it up, accept the connection, close it at once
//! (counted as shed), and take the reserve back.

use std::net::SocketAddr;

use mio::net::{TcpListener, TcpStream};

pub enum Accepted {
    Conn(TcpStream, SocketAddr),
    /// A connection was accepted and closed: no descriptor was free for it.
    Shed,
    /// Nothing more to accept now.
    None,
}

pub fn accept_or_shed(l: &TcpListener, spare: &mut Option<std::fs::File>) -> Accepted {
    loop {
        match l.accept() {
            Ok((s, p)) => return Accepted::Conn(s, p),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE)) => {
                let Some(f) = spare.take() else { return Accepted::None };
                drop(f);
                let shed = l.accept().is_ok();
                *spare = std::fs::File::open("/dev/null").ok();
                return if shed { Accepted::Shed } else { Accepted::None };
            }
            // WouldBlock, or a connection reset before accept: try again on the next readiness.
            Err(_) => return Accepted::None,
        }
    }
}
