//! The waiting packets of one talker: a fixed ring of slots indexed by sequence number, each
//! with room for the largest Opus packet, allocated once (no allocation per packet).

/// The largest Opus packet of one frame (RFC 6716 §3.2.1).
pub const MAX_PACKET: usize = 1275;
/// Slots in the ring: 16 frames (320 ms), more than the target's ceiling plus reordering.
pub const SLOTS: usize = 16;

/// One waiting packet.
#[derive(Debug, Clone)]
pub(crate) struct Slot {
    pub(crate) seq: u16,
    /// Its media time (extended RTP timestamp in µs).
    pub(crate) media_us: i64,
    len: usize,
    bytes: [u8; MAX_PACKET],
}

impl Slot {
    pub(crate) fn payload(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// Sequence-number distance from `from` to `to`, across the wrap at 65535.
pub(crate) fn seq_distance(from: u16, to: u16) -> i32 {
    i32::from(to.wrapping_sub(from) as i16)
}

#[derive(Debug)]
pub(crate) struct Ring {
    slots: Box<[Slot]>,
    occupied: [bool; SLOTS],
}

/// What became of a packet put in the ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Put {
    Stored,
    Duplicate,
}

impl Ring {
    pub(crate) fn new() -> Ring {
        let empty = Slot { seq: 0, media_us: 0, len: 0, bytes: [0; MAX_PACKET] };
        Ring { slots: vec![empty; SLOTS].into_boxed_slice(), occupied: [false; SLOTS] }
    }

    fn index(seq: u16) -> usize {
        usize::from(seq) % SLOTS
    }

    /// Stores `payload` (at most [`MAX_PACKET`] bytes; the caller checks) under `seq`. The
    /// caller keeps every stored seq within [`SLOTS`] of each other, so a slot holding another
    /// seq is stale and is replaced.
    pub(crate) fn put(&mut self, seq: u16, media_us: i64, payload: &[u8]) -> Put {
        let index = Ring::index(seq);
        let slot = &mut self.slots[index];
        if self.occupied[index] && slot.seq == seq {
            return Put::Duplicate;
        }
        slot.seq = seq;
        slot.media_us = media_us;
        slot.len = payload.len();
        slot.bytes[..payload.len()].copy_from_slice(payload);
        self.occupied[index] = true;
        Put::Stored
    }

    pub(crate) fn get(&self, seq: u16) -> Option<&Slot> {
        let index = Ring::index(seq);
        (self.occupied[index] && self.slots[index].seq == seq).then(|| &self.slots[index])
    }

    pub(crate) fn remove(&mut self, seq: u16) {
        let index = Ring::index(seq);
        if self.slots[index].seq == seq {
            self.occupied[index] = false;
        }
    }

    pub(crate) fn clear(&mut self) {
        self.occupied = [false; SLOTS];
    }

    /// The earliest stored seq at or after `from` within the ring's reach.
    pub(crate) fn earliest_from(&self, from: u16) -> Option<u16> {
        (0..SLOTS as u16).map(|k| from.wrapping_add(k)).find(|seq| self.get(*seq).is_some())
    }
}
