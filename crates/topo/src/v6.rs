//! IPv6 beside IPv4 (`ipv6 = true`): every subnet's /64 and every address follow from the IPv4
//! ones, so a topology names its addresses once and both families agree.
//!
//! The subnet `a.b.c.d/p` is `fd68:6f72:AABB:CCDD::/64` (a unique local prefix, `fd68:6f72` is
//! "ho" "r" in ASCII, then the IPv4 base's 32 bits in hexadecimal); its host `a.b.c.x` is that
//! prefix with the host's offset in the subnet as its last bits: `10.1.0.5` of `10.1.0.0/24`
//! is `fd68:6f72:a01:0::5`. IPv4 subnets never overlap, so neither do their /64s.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::Subnet;

/// The first 32 bits of every derived prefix.
const PREFIX: [u16; 2] = [0xfd68, 0x6f72];

/// The /64 of an IPv4 subnet (its prefix length is always 64).
pub fn subnet(s: &Subnet) -> Ipv6Addr {
    let b = u32::from(s.base);
    Ipv6Addr::new(PREFIX[0], PREFIX[1], (b >> 16) as u16, b as u16, 0, 0, 0, 0)
}

/// The IPv6 address of `a`, an address of subnet `s`.
pub fn addr(s: &Subnet, a: Ipv4Addr) -> Ipv6Addr {
    let off = u32::from(a).wrapping_sub(u32::from(s.base));
    let net = subnet(s).segments();
    Ipv6Addr::new(net[0], net[1], net[2], net[3], 0, 0, (off >> 16) as u16, off as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_follow_the_ipv4_ones() {
        let s = Subnet::parse("10.1.0.0/24").unwrap();
        assert_eq!(subnet(&s).to_string(), "fd68:6f72:a01::");
        assert_eq!(addr(&s, Ipv4Addr::new(10, 1, 0, 5)).to_string(), "fd68:6f72:a01:0:0:0:0:5".parse::<Ipv6Addr>().unwrap().to_string());
        let big = Subnet::parse("10.64.0.0/10").unwrap();
        assert_eq!(addr(&big, Ipv4Addr::new(10, 65, 2, 3)), "fd68:6f72:a40:0::1:203".parse::<Ipv6Addr>().unwrap());
        // distinct subnets, distinct /64s
        let t = Subnet::parse("10.1.1.0/24").unwrap();
        assert_ne!(subnet(&s), subnet(&t));
    }
}
