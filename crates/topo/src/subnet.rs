//! IPv4 subnets as topologies give them (`10.1.0.0/24`).

use std::net::Ipv4Addr;

/// An IPv4 subnet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
pub struct Subnet {
    pub base: Ipv4Addr,
    pub prefix: u8,
}

impl Subnet {
    pub fn parse(s: &str) -> Result<Subnet, String> {
        let (a, p) = s.split_once('/').ok_or_else(|| format!("`{s}` is not an IPv4 subnet like 10.1.0.0/24"))?;
        let base: Ipv4Addr = a.parse().map_err(|_| format!("`{a}` is not an IPv4 address"))?;
        let prefix: u8 = p.parse().ok().filter(|p| *p <= 30).ok_or_else(|| format!("prefix `/{p}` must be 0..=30"))?;
        let mask = Self::mask(prefix);
        if u32::from(base) & !mask != 0 {
            return Err(format!("`{s}` has host bits set; the subnet is {}/{prefix}", Ipv4Addr::from(u32::from(base) & mask)));
        }
        Ok(Subnet { base, prefix })
    }

    fn mask(prefix: u8) -> u32 {
        if prefix == 0 {
            0
        } else {
            u32::MAX << (32 - prefix)
        }
    }

    /// Usable host addresses.
    pub fn capacity(&self) -> u64 {
        (1u64 << (32 - self.prefix)) - 2
    }

    /// The `i`-th host address (0-based).
    pub fn host(&self, i: u64) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.base) + 1 + i as u32)
    }

    /// Whether `a` is in this subnet.
    pub fn contains(&self, a: Ipv4Addr) -> bool {
        let m = Self::mask(self.prefix);
        u32::from(a) & m == u32::from(self.base) & m
    }

    pub fn overlaps(&self, o: &Subnet) -> bool {
        let m = Self::mask(self.prefix.min(o.prefix));
        u32::from(self.base) & m == u32::from(o.base) & m
    }
}

impl std::fmt::Display for Subnet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.base, self.prefix)
    }
}
