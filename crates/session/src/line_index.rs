//! [`LineIndex`]: where each event's line starts in a session file, so that an event the log no
//! longer keeps in memory can be read back with one positioned read.
//!
//! It is the one piece of per-event state a long session keeps for its whole life, so it is
//! compact: a 4-byte offset per event from the start of its block, and a 16-byte block header
//! per 4,096 events (or sooner, when a block's lines would span more than 4 GiB).

/// Events per block at most.
const BLOCK: u64 = 4096;

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct LineIndex {
    /// `(first seq, where its line starts)` of each block, in seq order.
    blocks: Vec<(u64, u64)>,
    /// For each seq, where its line starts minus its block's start.
    deltas: Vec<u32>,
}

impl LineIndex {
    pub(crate) fn with_capacity(events: usize) -> Self {
        Self {
            blocks: Vec::with_capacity(events / BLOCK as usize + 1),
            deltas: Vec::with_capacity(events),
        }
    }

    /// Room for `additional` more events, exactly (a load knows how many it will add).
    pub(crate) fn reserve_exact(&mut self, additional: usize) {
        self.deltas.reserve_exact(additional);
    }

    /// How many events are indexed (seqs `0..len`).
    pub(crate) fn len(&self) -> u64 {
        self.deltas.len() as u64
    }

    /// Indexes the next seq, whose line starts at `start` (never before the previous one's;
    /// the members of a packed row share their row's start).
    pub(crate) fn push(&mut self, start: u64) {
        let seq = self.len();
        let delta = self.blocks.last().and_then(|&(first, base)| {
            if seq - first >= BLOCK {
                return None;
            }
            u32::try_from(start.checked_sub(base)?).ok()
        });
        match delta {
            Some(delta) => self.deltas.push(delta),
            None => {
                self.blocks.push((seq, start));
                self.deltas.push(0);
            }
        }
    }

    /// Where the line of `seq` starts.
    pub(crate) fn get(&self, seq: u64) -> Option<u64> {
        let delta = *self.deltas.get(usize::try_from(seq).ok()?)?;
        let block = self
            .blocks
            .partition_point(|&(first, _)| first <= seq)
            .checked_sub(1)?;
        Some(self.blocks[block].1 + u64::from(delta))
    }

    /// Indexes `other`'s seqs after this one's (a file parsed in parts): its blocks move over
    /// whole, so the part is copied once and never re-indexed.
    pub(crate) fn append(&mut self, other: LineIndex) {
        let shift = self.len();
        self.blocks.extend(
            other
                .blocks
                .into_iter()
                .map(|(first, base)| (first + shift, base)),
        );
        self.deltas.extend_from_slice(&other.deltas);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_start_reads_back_across_blocks_and_the_4_gib_reach() {
        let mut starts = Vec::new();
        let mut at = 100u64;
        for seq in 0..10_000u64 {
            starts.push(at);
            // Packed rows share a start; one line is 5 GiB long.
            if seq % 7 != 3 {
                at += 150 + seq % 40;
            }
            if seq == 6_000 {
                at += 5 << 30;
            }
        }
        let mut index = LineIndex::default();
        starts.iter().for_each(|&s| index.push(s));
        assert_eq!(index.len(), 10_000);
        for (seq, &start) in starts.iter().enumerate() {
            assert_eq!(index.get(seq as u64), Some(start), "seq {seq}");
        }
        assert_eq!(index.get(10_000), None);
        // Blocks at seq 0 and 4,096, and one at 6,001, past the 5 GiB line: that block then
        // runs 4,096 events on, beyond the end.
        assert_eq!(
            index.blocks.iter().map(|b| b.0).collect::<Vec<_>>(),
            [0, 4_096, 6_001]
        );

        let mut halves = LineIndex::default();
        let mut second = LineIndex::default();
        starts[..3_000].iter().for_each(|&s| halves.push(s));
        starts[3_000..].iter().for_each(|&s| second.push(s));
        halves.append(second);
        for (seq, &start) in starts.iter().enumerate() {
            assert_eq!(halves.get(seq as u64), Some(start), "seq {seq}");
        }
    }
}
