#![no_main]
use libfuzzer_sys::fuzz_target;

// Any bytes as a frame the link emulator reads with its virtio-net header (the first 10 bytes):
// a process in an emulated host can send anything. Cutting a UDP GSO super-frame never panics,
// and what comes out is the frame's payload, every byte once, in datagrams of at most the
// segment size, each carrying the frame's headers. Joining those datagrams again (as the link
// does on the way out) never panics either, and what it joins cuts back into the same payloads.
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
        let shape = horde_emu::udp_gso::shape(&vnet, frame).expect("split it");
        let refs: Vec<&[u8]> = out.iter().map(|d| d.as_slice()).collect();
        let mut sup = Vec::new();
        if let Some((joined, vnet2)) = horde_emu::udp_gso::join(&refs, &mut sup) {
            let mut again = Vec::new();
            assert!(horde_emu::udp_gso::split(&vnet2, &sup, &mut again), "a joined frame cuts");
            assert_eq!(again.len(), joined);
            for (a, b) in again.iter().zip(&out) {
                assert_eq!(a[shape.hdr..], b[shape.hdr..], "the same payloads, in order");
            }
        }
    } else {
        assert!(out.is_empty());
    }
    // the same bytes as a run of datagrams to join, cut anywhere
    let cut = data[0] as usize % 7 + 1;
    let chunks: Vec<&[u8]> = frame.chunks(frame.len() / cut + 1).collect();
    let mut sup = Vec::new();
    if let Some((joined, _)) = horde_emu::udp_gso::join(&chunks, &mut sup) {
        assert!((2..=chunks.len()).contains(&joined));
    }
});
