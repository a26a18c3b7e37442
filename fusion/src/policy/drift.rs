//! Fused mode's answer to an op stream whose sizes change at every
//! iteration (a loop over inputs of a new length each time): nothing in it
//! repeats, so deferring its ops finds no chunk to compile, only costs the
//! overlap of the device's work with the host's recording that eager
//! dispatch gets. When most ops of two chunks in a row have new sizes
//! (`stream::tiers` splits them), the stream drifts: each call is
//! launched as it is recorded, as strict mode launches it (the same
//! programs), while `SizeDrift` watches the segments between host reads.
//! A segment whose ops and sizes are those of one of the last few segments
//! means the sizes have stopped changing (or cycle): the stream fuses again.
//!
//! The window still sees every op while drifting, so where the period cuts
//! after the drift ends is where it would have cut without it.

use std::collections::VecDeque;

/// Segments remembered to find a repeat.
const RECENT: usize = 8;

/// The segments between host reads of a drifting stream.
#[derive(Clone, Debug, Default)]
pub struct SizeDrift {
    /// The segment being recorded: its ops' exact signatures, combined.
    segment: u64,
    /// Ops in it.
    ops: usize,
    /// The last segments' hashes, newest last.
    recent: VecDeque<u64>,
}

impl SizeDrift {
    pub fn new() -> SizeDrift {
        SizeDrift::default()
    }

    /// One op of the segment, by its exact signature (its parameters and its
    /// inputs' types, sizes included).
    pub fn record(&mut self, exact: u64) {
        self.segment =
            (self.segment.rotate_left(5) ^ exact).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        self.ops += 1;
    }

    /// A host read ends the segment: true when it repeats one of the last
    /// `RECENT` segments (the drift is over). A segment of no ops (two reads
    /// in a row) is no segment.
    pub fn end_segment(&mut self) -> bool {
        if self.ops == 0 {
            return false;
        }
        let segment = std::mem::take(&mut self.segment);
        self.ops = 0;
        if self.recent.contains(&segment) {
            return true;
        }
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(segment);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One iteration of a loop over a tensor of length `n`: three ops whose
    /// signatures depend on `n`, then a read.
    fn iteration(d: &mut SizeDrift, n: u64) -> bool {
        for op in 0..3u64 {
            d.record(op * 1000 + n);
        }
        d.end_segment()
    }

    #[test]
    fn sizes_that_change_every_iteration_keep_the_stream_drifting() {
        let mut d = SizeDrift::new();
        for n in 33..100 {
            assert!(!iteration(&mut d, n), "length {n}");
        }
    }

    #[test]
    fn the_drift_ends_when_an_iteration_repeats() {
        let mut d = SizeDrift::new();
        for n in 33..40 {
            assert!(!iteration(&mut d, n));
        }
        // Two iterations of length 40: the second repeats the first.
        assert!(!iteration(&mut d, 40));
        assert!(iteration(&mut d, 40));
    }

    #[test]
    fn sizes_that_cycle_end_the_drift_within_the_remembered_segments() {
        let mut d = SizeDrift::new();
        let lengths = [8u64, 16, 24];
        let ended = (0..6).position(|i| iteration(&mut d, lengths[i % 3]));
        assert_eq!(ended, Some(3), "the fourth iteration repeats the first");
        // A cycle longer than the segments remembered never repeats in view.
        let mut d = SizeDrift::new();
        for i in 0..40u64 {
            assert!(
                !iteration(&mut d, 100 + i % (RECENT as u64 + 1)),
                "iteration {i}"
            );
        }
    }

    #[test]
    fn reads_with_no_ops_between_them_are_no_segment() {
        let mut d = SizeDrift::new();
        assert!(!iteration(&mut d, 5));
        // Reading twice in a row: the empty segment repeats nothing.
        assert!(!d.end_segment());
        assert!(!d.end_segment());
        assert!(!iteration(&mut d, 6));
        // Order matters: the same ops in another order are another segment.
        d.record(2006);
        d.record(1006);
        d.record(6);
        assert!(!d.end_segment());
    }
}
