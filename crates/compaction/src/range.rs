//! Range selection (§8.5): the longest head-anchored span whose removal keeps at least
//! `retain_tokens` of the newest surface and never splits a tool call from its result.

use dsh_token_meter::Node;

use crate::pairing::PairingView;

/// `selectCompactableRange`: `(start_seq, end_seq)` by surface position, or `None`.
pub fn select_compactable_range(
    nodes: &[Node],
    pairing: &PairingView,
    retain_tokens: u64,
) -> Option<(u64, u64)> {
    if nodes.is_empty() {
        return None;
    }
    let mut kept = 0u64;
    let mut keep_from = None;
    for (index, node) in nodes.iter().enumerate().rev() {
        kept += node.tokens;
        if kept >= retain_tokens {
            keep_from = Some(index);
            break;
        }
    }
    let mut keep_from = keep_from?;
    while keep_from > 0 && !pairing.balanced_before_at(keep_from) {
        keep_from -= 1;
    }
    if keep_from == 0 {
        return None;
    }
    Some((nodes[0].seq, nodes[keep_from - 1].seq))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pairing::PairedNode;

    fn surface(shape: &[(u64, u64, u64, u64)]) -> (Vec<Node>, PairingView) {
        let nodes = shape
            .iter()
            .map(|&(seq, tokens, _, _)| Node { seq, tokens })
            .collect();
        let paired = shape
            .iter()
            .map(|&(seq, _, opens, answers)| PairedNode {
                seq,
                opens,
                answers,
            })
            .collect();
        (nodes, PairingView::from_nodes(paired).unwrap())
    }

    #[test]
    fn retain_zero_keeps_the_newest_indivisible_unit() {
        // The compaction-recovery shape: prompt, assistant call, result.
        let (nodes, pairing) = surface(&[(4, 266, 0, 0), (13, 30, 1, 0), (15, 10, 0, 1)]);
        assert_eq!(select_compactable_range(&nodes, &pairing, 0), Some((4, 4)));
    }

    #[test]
    fn the_range_is_head_anchored_and_never_splits_a_pair() {
        // Checklist E53.
        let (nodes, pairing) = surface(&[
            (1, 100, 0, 0),
            (2, 100, 1, 0),
            (3, 100, 0, 1),
            (4, 100, 2, 0),
            (5, 100, 0, 1),
            (6, 100, 0, 1),
            (7, 100, 0, 0),
        ]);
        // Retaining 150 would start at 6; the first balanced start at or before it is 4.
        assert_eq!(
            select_compactable_range(&nodes, &pairing, 150),
            Some((1, 3))
        );
        // Retaining 100 keeps only 7, which is balanced.
        assert_eq!(
            select_compactable_range(&nodes, &pairing, 100),
            Some((1, 6))
        );
        // Retaining everything leaves nothing to compact.
        assert_eq!(select_compactable_range(&nodes, &pairing, 700), None);
        assert_eq!(select_compactable_range(&nodes, &pairing, 10_000), None);
    }

    #[test]
    fn a_single_node_or_an_unbalanced_tail_is_not_compactable() {
        let (nodes, pairing) = surface(&[(1, 5, 0, 0)]);
        assert_eq!(select_compactable_range(&nodes, &pairing, 0), None);
        let (nodes, pairing) = surface(&[(1, 5, 1, 0), (2, 5, 0, 1)]);
        assert_eq!(select_compactable_range(&nodes, &pairing, 0), None);
        assert_eq!(select_compactable_range(&[], &pairing, 0), None);
    }
}
