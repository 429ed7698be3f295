//! Datagrams offered to a link emulator's socket, counted in the kernel before the socket may
//! drop them. A UDP GSO super-frame reaches the link whole (up to 64 datagrams in one buffer),
//! and the kernel counts what the socket's full receive buffer drops in buffers
//! (`PACKET_STATISTICS`), not datagrams. A tiny eBPF socket filter adds each buffer's datagram
//! count (`gso_segs`, 1 for a plain frame) to a one-entry array map; it runs before the socket's
//! buffer is checked, so datagrams offered − datagrams read is what the socket lost once the
//! socket is drained. The program only counts: it keeps every frame whole.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_LOOKUP_ELEM: libc::c_long = 1;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_MAP_TYPE_ARRAY: u32 = 2;
const BPF_PROG_TYPE_SOCKET_FILTER: u32 = 1;
const SO_ATTACH_BPF: libc::c_int = 50;
/// `offsetof(struct __sk_buff, gso_segs)` (uapi, stable since Linux 4.19).
const GSO_SEGS: i16 = 164;

/// One eBPF instruction (`struct bpf_insn`).
#[repr(C)]
#[derive(Clone, Copy)]
struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn { code, regs: (src << 4) | dst, off, imm }
}

/// The counter of one socket: its map, and the program that holds it (attached to the socket).
pub struct Offered {
    map: OwnedFd,
    _prog: OwnedFd,
}

fn bpf(cmd: libc::c_long, attr: &mut [u64; 16]) -> libc::c_long {
    // SAFETY: `attr` is a zero-padded `union bpf_attr` of 128 bytes, larger than each command's
    // part; pointers in it point at live buffers of the caller.
    unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_mut_ptr(), std::mem::size_of_val(attr)) }
}

impl Offered {
    /// Attaches a counter to packet socket `sock`. Fails where the kernel has no eBPF (the
    /// caller then counts buffers).
    pub fn attach(sock: RawFd) -> std::io::Result<Offered> {
        let mut attr = [0u64; 16];
        // map_type, key_size | value_size, max_entries
        attr[0] = BPF_MAP_TYPE_ARRAY as u64 | (4u64 << 32);
        attr[1] = 8 | (1u64 << 32);
        let fd = bpf(BPF_MAP_CREATE, &mut attr);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a descriptor the kernel just returned, owned here.
        let map = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
        let prog = [
            insn(0xbf, 6, 1, 0, 0),               // r6 = ctx
            insn(0x61, 7, 6, GSO_SEGS, 0),        // r7 = ctx->gso_segs
            insn(0x55, 7, 0, 1, 0),               // if r7 != 0 skip
            insn(0xb7, 7, 0, 0, 1),               //   r7 = 1
            insn(0x62, 10, 0, -4, 0),             // key = 0 on the stack
            insn(0x18, 1, 1, 0, map.as_raw_fd()), // r1 = map
            insn(0, 0, 0, 0, 0),
            insn(0xbf, 2, 10, 0, 0), // r2 = &key
            insn(0x07, 2, 0, 0, -4),
            insn(0x85, 0, 0, 0, 1),  // r0 = bpf_map_lookup_elem(map, &key)
            insn(0x15, 0, 0, 1, 0),  // if r0 == 0 skip
            insn(0xdb, 0, 7, 0, 0),  //   atomic *(u64 *)r0 += r7
            insn(0xb4, 0, 0, 0, -1), // keep the whole frame
            insn(0x95, 0, 0, 0, 0),  // exit
        ];
        let license = b"GPL\0";
        let mut attr = [0u64; 16];
        attr[0] = BPF_PROG_TYPE_SOCKET_FILTER as u64 | ((prog.len() as u64) << 32);
        attr[1] = prog.as_ptr() as u64;
        attr[2] = license.as_ptr() as u64;
        let fd = bpf(BPF_PROG_LOAD, &mut attr);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: as above.
        let prog_fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
        let raw = prog_fd.as_raw_fd();
        // SAFETY: setsockopt with an int-sized descriptor value.
        if unsafe { libc::setsockopt(sock, libc::SOL_SOCKET, SO_ATTACH_BPF, &raw as *const _ as *const libc::c_void, 4) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Offered { map, _prog: prog_fd })
    }

    /// Datagrams offered to the socket so far.
    pub fn read(&self) -> u64 {
        let (key, mut value) = (0u32, 0u64);
        let mut attr = [0u64; 16];
        attr[0] = self.map.as_raw_fd() as u64;
        attr[1] = &key as *const u32 as u64;
        attr[2] = &mut value as *mut u64 as u64;
        if bpf(BPF_MAP_LOOKUP_ELEM, &mut attr) == 0 {
            value
        } else {
            0
        }
    }
}
