//! A crowd that holds a listener's places: connections from many loopback addresses that
//! never authenticate (issue 47's lockout tests).

use std::net::{SocketAddr, TcpStream};

/// Addresses the crowd comes from: 127.0.1.10 to 127.0.1.25.
pub const CROWD_ADDRESSES: u8 = 16;

/// Connection number `k` of the crowd to `to`: from 127.0.1.(10 + k mod 16), having sent
/// `first` (nothing: a silent peer; half a request: a slow one). None if it could not connect.
pub fn crowd(to: SocketAddr, k: u8, first: &[u8]) -> Option<TcpStream> {
    use std::io::Write as _;
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).ok()?;
    s.bind(&SocketAddr::from(([127, 0, 1, 10 + k % CROWD_ADDRESSES], 0)).into()).ok()?;
    s.connect(&to.into()).ok()?;
    let mut t = TcpStream::from(s);
    if !first.is_empty() {
        t.write_all(first).ok()?;
    }
    Some(t)
}
