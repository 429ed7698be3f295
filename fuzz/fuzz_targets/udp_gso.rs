#![no_main]
use libfuzzer_sys::fuzz_target;

// Any bytes as a frame the link emulator reads with its virtio-net header (the first 10 bytes):
// a process in an emulated host can send anything. Cutting a UDP GSO super-frame never panics,
// and what comes out is the frame's payload, every byte once, in datagrams of at most the
// segment size, each carrying the frame's headers.
fuzz_target!(|data: &[u8]| {
    if data.len() < 10 {
        return;
    }
    let vnet: [u8; 10] = data[..10].try_into().unwrap();
    let frame = &data[10..];
    let mut out = Vec::new();
    if horde_emu::udp_gso::split(&vnet, frame, &mut out) {
        // n datagrams of one header each carry the frame's payload once: n·h + (F − h) bytes
        let (n, total) = (out.len(), out.iter().map(|d| d.len()).sum::<usize>());
        assert!(n > 0 && total >= frame.len(), "every byte once, with a header each");
        assert!(n == 1 || (total - frame.len()) % (n - 1) == 0, "one header per datagram");
        assert!(out.iter().all(|d| d.len() <= frame.len()));
    } else {
        assert!(out.is_empty());
    }
});
