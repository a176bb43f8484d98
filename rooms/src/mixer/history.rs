//! The last few frames of a room's full mix, as its shared encoder was fed them: what a new
//! own encoder is primed with.

use crate::jitter::FRAME_SAMPLES;

/// Frames kept (and primed by default): 100 ms, measured enough for an encoder's state to
/// approach the shared one's (see the switch test).
pub const HISTORY_FRAMES: usize = 5;

#[derive(Debug)]
pub(crate) struct MixHistory {
    frames: Vec<[f32; FRAME_SAMPLES]>,
    /// Frames pushed so far (the ring's write position is `pushed % len`).
    pushed: usize,
}

impl MixHistory {
    pub(crate) fn new(frames: usize) -> MixHistory {
        MixHistory { frames: vec![[0.0; FRAME_SAMPLES]; frames.max(1)], pushed: 0 }
    }

    pub(crate) fn push(&mut self, frame: &[f32]) {
        let slot = self.pushed % self.frames.len();
        self.frames[slot].copy_from_slice(frame);
        self.pushed += 1;
    }

    /// The last `count` frames (fewer if fewer were pushed), oldest first.
    pub(crate) fn last(&self, count: usize) -> impl Iterator<Item = &[f32]> {
        let count = count.min(self.pushed).min(self.frames.len());
        let len = self.frames.len();
        (self.pushed - count..self.pushed).map(move |n| &self.frames[n % len][..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_frames_come_oldest_first() {
        let mut history = MixHistory::new(3);
        for value in 0..5 {
            history.push(&[value as f32; FRAME_SAMPLES]);
        }
        let firsts: Vec<f32> = history.last(10).map(|frame| frame[0]).collect();
        assert_eq!(firsts, [2.0, 3.0, 4.0]);
        assert_eq!(history.last(1).map(|frame| frame[0]).collect::<Vec<_>>(), [4.0]);
    }
}
