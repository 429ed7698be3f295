//! Netchan message bodies: the engine's bit stream. A value of N bits is written as its
//! `N mod 8` low bits raw (least significant first), then each remaining byte, low byte first,
//! as its code in the static Huffman tree ([`crate::huffman::Static`]). Bytes, shorts and longs
//! are 8, 16 and 32 such bits; strings are bytes up to a 0.

use crate::huffman::{BitSink, BitSource, Static};

/// Reading ran past the end of the message (or met a code that is not a byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("message ends inside a field")]
pub struct Overrun;

pub struct Writer {
    sink: BitSink,
    huff: &'static Static,
}

impl Default for Writer {
    fn default() -> Self {
        Writer::new()
    }
}

impl Writer {
    pub fn new() -> Writer {
        Writer { sink: BitSink { buf: Vec::with_capacity(256), bit: 0 }, huff: Static::get() }
    }

    /// `bits` (1..=32) low bits of `value`.
    pub fn bits(&mut self, value: u32, bits: u32) {
        debug_assert!((1..=32).contains(&bits));
        let mut v = if bits == 32 { value } else { value & ((1u32 << bits) - 1) };
        let raw = bits & 7;
        for _ in 0..raw {
            self.sink.put(v & 1 == 1);
            v >>= 1;
        }
        for _ in 0..(bits - raw) / 8 {
            self.huff.write(v as u8, &mut self.sink);
            v >>= 8;
        }
    }

    pub fn byte(&mut self, v: u8) {
        self.bits(v as u32, 8);
    }

    pub fn short(&mut self, v: i16) {
        self.bits(v as u16 as u32, 16);
    }

    pub fn long(&mut self, v: i32) {
        self.bits(v as u32, 32);
    }

    /// A string and its terminating 0 (the engine's `MSG_WriteString`: at most 1,023 bytes).
    pub fn string(&mut self, s: &str) {
        for &b in s.as_bytes().iter().take(1023) {
            self.byte(b);
        }
        self.byte(0);
    }

    /// The message's bytes. Like the engine, the length counts the byte holding the next bit.
    pub fn finish(self) -> Vec<u8> {
        let mut buf = self.sink.buf;
        buf.resize((self.sink.bit >> 3) + 1, 0);
        buf
    }
}

pub struct Reader<'a> {
    src: BitSource<'a>,
    huff: &'static Static,
}

impl<'a> Reader<'a> {
    /// Reads `buf` from bit `start`.
    pub fn new(buf: &'a [u8], start_bit: usize) -> Reader<'a> {
        Reader { src: BitSource { buf, bit: start_bit, end: buf.len() * 8 }, huff: Static::get() }
    }

    /// Bits read so far (from the start of the buffer).
    pub fn bit(&self) -> usize {
        self.src.bit
    }

    pub fn bits(&mut self, bits: u32) -> Result<u32, Overrun> {
        let raw = bits & 7;
        let mut v = 0u32;
        for i in 0..raw {
            v |= (self.src.get().ok_or(Overrun)? as u32) << i;
        }
        let mut shift = raw;
        while shift < bits {
            let b = self.huff.read(&mut self.src).ok_or(Overrun)?;
            v |= (b as u32) << shift;
            shift += 8;
        }
        Ok(v)
    }

    pub fn byte(&mut self) -> Result<u8, Overrun> {
        Ok(self.bits(8)? as u8)
    }

    pub fn short(&mut self) -> Result<i16, Overrun> {
        Ok(self.bits(16)? as u16 as i16)
    }

    pub fn long(&mut self) -> Result<i32, Overrun> {
        Ok(self.bits(32)? as i32)
    }

    /// A 0-terminated string of at most `max - 1` bytes, as the engine reads it: `%` and bytes
    /// over 127 become `.`; at the limit it stops without reading the terminator.
    pub fn string_max(&mut self, max: usize) -> Result<String, Overrun> {
        let mut s = String::new();
        while s.len() < max - 1 {
            let c = self.byte()?;
            if c == 0 {
                break;
            }
            s.push(if c == b'%' || c > 127 { '.' } else { c as char });
        }
        Ok(s)
    }

    /// `MSG_ReadString` (1,024-byte buffer).
    pub fn string(&mut self) -> Result<String, Overrun> {
        self.string_max(1024)
    }

    /// `MSG_ReadBigString` (8,192-byte buffer).
    pub fn big_string(&mut self) -> Result<String, Overrun> {
        self.string_max(8192)
    }

    pub fn skip_bytes(&mut self, n: usize) -> Result<(), Overrun> {
        for _ in 0..n {
            self.byte()?;
        }
        Ok(())
    }
}
