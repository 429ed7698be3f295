//! The Quake 3 engine's Huffman coding.
//!
//! The engine uses one algorithm in two ways:
//! - **adaptive** (FGK, as in Sayood's *Introduction to Data Compression*): both ends start from
//!   a tree holding only the NYT ("not yet transmitted") node and update it after every symbol.
//!   A symbol not seen yet is sent as NYT's code followed by its 8 bits, most significant first.
//!   Used once per connection: the userinfo of the out-of-band `connect` ([`compress`],
//!   [`decompress`]).
//! - **static**: the tree that results from adding each byte value as often as
//!   [`crate::hdata::HDATA`] says, in symbol order, is the fixed code of every netchan message
//!   ([`Static`]).
//!
//! Codes are written least-significant bit first within each byte. The tree must match the
//! engine's bit for bit, including how it breaks ties between nodes of equal weight, so the
//! update below keeps the engine's model: nodes ranked in a doubly-linked list (lowest weight
//! first, NYT at the head), and for each weight a shared "block leader" cell naming the node
//! that a node of that weight swaps with before its weight grows. Vectors derived from the
//! engine's own output pin it (`tests/it/layers.rs`).

use std::sync::OnceLock;

/// Symbol of the not-yet-transmitted node.
const NYT: u16 = 256;
/// Symbol of internal nodes.
const INTERNAL: u16 = 257;
const NONE: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct Node {
    symbol: u16,
    weight: u32,
    parent: u32,
    left: u32,
    right: u32,
    /// Rank list: `next` is the next higher rank.
    next: u32,
    prev: u32,
    /// Index of the leader cell of this node's weight block.
    head: u32,
}

impl Node {
    fn new(symbol: u16, weight: u32) -> Node {
        Node { symbol, weight, parent: NONE, left: NONE, right: NONE, next: NONE, prev: NONE, head: NONE }
    }
}

/// An adaptive Huffman tree in the engine's form.
#[derive(Clone)]
pub struct Tree {
    nodes: Vec<Node>,
    root: u32,
    /// The NYT node: the head (lowest rank) of the rank list.
    nyt: u32,
    /// Node of each symbol once seen (257 entries: the bytes and NYT).
    loc: Vec<u32>,
    /// Block leader cells and their free list.
    cells: Vec<u32>,
    free_cells: Vec<u32>,
}

impl Default for Tree {
    fn default() -> Self {
        Tree::new()
    }
}

impl Tree {
    /// A tree holding only NYT.
    pub fn new() -> Tree {
        let mut loc = vec![NONE; 257];
        loc[NYT as usize] = 0;
        Tree { nodes: vec![Node::new(NYT, 0)], root: 0, nyt: 0, loc, cells: Vec::new(), free_cells: Vec::new() }
    }

    fn cell(&mut self) -> u32 {
        match self.free_cells.pop() {
            Some(c) => c,
            None => {
                self.cells.push(NONE);
                self.cells.len() as u32 - 1
            }
        }
    }

    fn n(&self, i: u32) -> &Node {
        &self.nodes[i as usize]
    }

    fn m(&mut self, i: u32) -> &mut Node {
        &mut self.nodes[i as usize]
    }

    /// Exchanges two nodes' places in the tree. Two children of one parent stay as they are
    /// (the engine's behaviour: the second relink undoes the first).
    fn swap_tree(&mut self, a: u32, b: u32) {
        let (pa, pb) = (self.n(a).parent, self.n(b).parent);
        if pa != NONE {
            if self.n(pa).left == a {
                self.m(pa).left = b;
            } else {
                self.m(pa).right = b;
            }
        } else {
            self.root = b;
        }
        if pb != NONE {
            if self.n(pb).left == b {
                self.m(pb).left = a;
            } else {
                self.m(pb).right = a;
            }
        } else {
            self.root = a;
        }
        self.m(a).parent = pb;
        self.m(b).parent = pa;
    }

    /// Exchanges two nodes' ranks (places in the list), adjacent or not.
    fn swap_list(&mut self, a: u32, b: u32) {
        if a == b {
            return;
        }
        let t = self.n(a).next;
        self.m(a).next = self.n(b).next;
        self.m(b).next = t;
        let t = self.n(a).prev;
        self.m(a).prev = self.n(b).prev;
        self.m(b).prev = t;
        if self.n(a).next == a {
            self.m(a).next = b;
        }
        if self.n(b).next == b {
            self.m(b).next = a;
        }
        for x in [a, b] {
            let nx = self.n(x).next;
            if nx != NONE {
                self.m(nx).prev = x;
            }
            let pv = self.n(x).prev;
            if pv != NONE {
                self.m(pv).next = x;
            }
        }
    }

    /// Adds one to `node`'s weight and then to its ancestors', keeping the sibling property.
    fn increment(&mut self, mut node: u32) {
        // Iterative form of the engine's recursion: ancestors are incremented first, each
        // node's list fix-up after its parent's increment.
        let mut path = Vec::new();
        while node != NONE {
            self.step_up(node);
            path.push(node);
            node = self.n(node).parent;
        }
        for &n in path.iter().rev().skip(1) {
            let p = self.n(n).parent;
            if self.n(n).prev == p {
                self.swap_list(n, p);
                let h = self.n(n).head;
                if self.cells[h as usize] == n {
                    self.cells[h as usize] = p;
                }
            }
        }
    }

    /// The part of one increment before recursing to the parent.
    fn step_up(&mut self, node: u32) {
        let w = self.n(node).weight;
        let next = self.n(node).next;
        if next != NONE && self.n(next).weight == w {
            let leader = self.cells[self.n(node).head as usize];
            if leader != self.n(node).parent {
                self.swap_tree(leader, node);
            }
            self.swap_list(leader, node);
        }
        let prev = self.n(node).prev;
        let head = self.n(node).head;
        if prev != NONE && self.n(prev).weight == w {
            self.cells[head as usize] = prev;
        } else {
            self.cells[head as usize] = NONE;
            self.free_cells.push(head);
        }
        self.m(node).weight = w + 1;
        let next = self.n(node).next;
        if next != NONE && self.n(next).weight == w + 1 {
            self.m(node).head = self.n(next).head;
        } else {
            let c = self.cell();
            self.cells[c as usize] = node;
            self.m(node).head = c;
        }
    }

    /// Counts one more occurrence of `ch`, adding its node if it is new.
    pub fn add(&mut self, ch: u8) {
        let at = self.loc[ch as usize];
        if at != NONE {
            self.increment(at);
            return;
        }
        let nyt = self.nyt;
        let leaf = self.nodes.len() as u32;
        let inner = leaf + 1;
        self.nodes.push(Node::new(ch as u16, 1));
        self.nodes.push(Node::new(INTERNAL, 1));
        // The new internal node goes right above NYT in rank, then the leaf between them.
        for new in [inner, leaf] {
            let first = self.n(nyt).next;
            self.m(new).next = first;
            let head = if first != NONE {
                self.m(first).prev = new;
                if self.n(first).weight == 1 {
                    self.n(first).head
                } else {
                    let c = self.cell();
                    self.cells[c as usize] = if new == leaf { inner } else { new };
                    c
                }
            } else {
                let c = self.cell();
                self.cells[c as usize] = new;
                c
            };
            self.m(new).head = head;
            self.m(nyt).next = new;
            self.m(new).prev = nyt;
        }
        // NYT's place in the tree goes to the new internal node: NYT left, the leaf right.
        let p = self.n(nyt).parent;
        if p != NONE {
            if self.n(p).left == nyt {
                self.m(p).left = inner;
            } else {
                self.m(p).right = inner;
            }
        } else {
            self.root = inner;
        }
        self.m(inner).right = leaf;
        self.m(inner).left = nyt;
        self.m(inner).parent = p;
        self.m(nyt).parent = inner;
        self.m(leaf).parent = inner;
        self.loc[ch as usize] = leaf;
        if p != NONE {
            self.increment(p);
        }
    }

    /// The code of `node`: bits from the root down, and their count.
    fn code_of(&self, node: u32) -> (u64, u8) {
        let mut bits = Vec::new();
        let mut n = node;
        while self.n(n).parent != NONE {
            let p = self.n(n).parent;
            bits.push(self.n(p).right == n);
            n = p;
        }
        let mut v = 0u64;
        for (k, b) in bits.iter().rev().enumerate() {
            v |= (*b as u64) << k;
        }
        (v, bits.len() as u8)
    }

    /// Writes the code of `ch` (NYT and the raw byte if `ch` is new) to `w`.
    fn transmit(&self, ch: u8, w: &mut BitSink) {
        let at = self.loc[ch as usize];
        if at == NONE {
            let (v, n) = self.code_of(self.nyt);
            w.put_code(v, n);
            for i in (0..8).rev() {
                w.put((ch >> i) & 1 == 1);
            }
        } else {
            let (v, n) = self.code_of(at);
            w.put_code(v, n);
        }
    }

    /// Reads one symbol's code; `None` at the end of input or on a path that ends nowhere.
    fn receive(&self, r: &mut BitSource) -> Option<u16> {
        let mut n = self.root;
        while self.n(n).symbol == INTERNAL {
            n = if r.get()? { self.n(n).right } else { self.n(n).left };
            if n == NONE {
                return None;
            }
        }
        Some(self.n(n).symbol)
    }
}

/// Bits written least-significant first within each byte.
pub(crate) struct BitSink {
    pub buf: Vec<u8>,
    pub bit: usize,
}

impl BitSink {
    pub fn put(&mut self, b: bool) {
        if self.bit & 7 == 0 {
            self.buf.push(0);
        }
        if b {
            let i = self.bit >> 3;
            self.buf[i] |= 1 << (self.bit & 7);
        }
        self.bit += 1;
    }

    /// A code given root-first in `v`'s low `n` bits (bit 0 first).
    fn put_code(&mut self, v: u64, n: u8) {
        for k in 0..n {
            self.put((v >> k) & 1 == 1);
        }
    }
}

/// Bits read least-significant first within each byte, up to `end` bits.
pub(crate) struct BitSource<'a> {
    pub buf: &'a [u8],
    pub bit: usize,
    pub end: usize,
}

impl BitSource<'_> {
    pub fn get(&mut self) -> Option<bool> {
        if self.bit >= self.end {
            return None;
        }
        let b = (self.buf[self.bit >> 3] >> (self.bit & 7)) & 1 == 1;
        self.bit += 1;
        Some(b)
    }
}

/// Compresses `data` as the engine's out-of-band `connect` does: a big-endian 16-bit length,
/// then adaptive codes, padded to whole bytes (plus one byte, as the engine writes).
pub fn compress(data: &[u8]) -> Vec<u8> {
    let mut w = BitSink { buf: vec![(data.len() >> 8) as u8, data.len() as u8], bit: 16 };
    let mut t = Tree::new();
    for &ch in data {
        t.transmit(ch, &mut w);
        t.add(ch);
    }
    let len = (w.bit + 8) >> 3;
    w.buf.resize(len, 0);
    w.buf
}

/// Why a compressed block could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HuffError {
    #[error("compressed block shorter than its 2-byte length")]
    Short,
    #[error("compressed block ends before its {0} symbols")]
    Truncated(usize),
    #[error("compressed block says {0} bytes, more than the {1} allowed")]
    TooLong(usize, usize),
}

/// Reverses [`compress`]: at most `max` bytes (the length field is checked against it).
pub fn decompress(block: &[u8], max: usize) -> Result<Vec<u8>, HuffError> {
    if block.len() < 2 {
        return Err(HuffError::Short);
    }
    let n = (block[0] as usize) << 8 | block[1] as usize;
    if n > max {
        return Err(HuffError::TooLong(n, max));
    }
    let mut r = BitSource { buf: block, bit: 16, end: block.len() * 8 };
    let mut t = Tree::new();
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let mut ch = t.receive(&mut r).ok_or(HuffError::Truncated(n))?;
        if ch == NYT {
            ch = 0;
            for _ in 0..8 {
                ch = ch << 1 | r.get().ok_or(HuffError::Truncated(n))? as u16;
            }
        }
        out.push(ch as u8);
        t.add(ch as u8);
    }
    Ok(out)
}

/// The fixed code of netchan messages: each byte's code (root-first, bit 0 first) and a
/// decoding table walked bit by bit.
pub struct Static {
    codes: [(u64, u8); 256],
    tree: Tree,
}

impl Static {
    /// The engine's message code, built once per process (about a million tree updates).
    pub fn get() -> &'static Static {
        static S: OnceLock<Static> = OnceLock::new();
        S.get_or_init(|| {
            let mut tree = Tree::new();
            for (ch, &count) in crate::hdata::HDATA.iter().enumerate() {
                for _ in 0..count {
                    tree.add(ch as u8);
                }
            }
            let mut codes = [(0u64, 0u8); 256];
            for (ch, c) in codes.iter_mut().enumerate() {
                *c = tree.code_of(tree.loc[ch]);
            }
            Static { codes, tree }
        })
    }

    /// The code of byte `ch`: bits root-first from bit 0, and their count.
    pub fn code(&self, ch: u8) -> (u64, u8) {
        self.codes[ch as usize]
    }

    pub(crate) fn write(&self, ch: u8, w: &mut BitSink) {
        let (v, n) = self.codes[ch as usize];
        w.put_code(v, n);
    }

    /// One byte, or `None` at the end of input or on the NYT code (not a byte in this tree).
    pub(crate) fn read(&self, r: &mut BitSource) -> Option<u8> {
        match self.tree.receive(r)? {
            s if s < 256 => Some(s as u8),
            _ => None,
        }
    }
}
