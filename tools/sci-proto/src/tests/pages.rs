//! The heap page allocator against a model: runs never overlap, stay inside the heap,
//! and freeing gives the pages back.

use proptest::prelude::*;

use crate::proto::pages::{alloc, bitmap_words, free, in_use};

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn allocations_are_disjoint_and_freed(
        total in 1usize..300,
        ops in proptest::collection::vec((any::<bool>(), 0usize..40, any::<usize>()), 1..200),
    ) {
        let mut bitmap = vec![0u64; bitmap_words(total)];
        let mut owned: Vec<Option<usize>> = vec![None; total];
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for (do_alloc, n, pick) in ops {
            if do_alloc || runs.is_empty() {
                match alloc(&mut bitmap, total, n) {
                    Some(first) => {
                        prop_assert!(n > 0 && first + n <= total);
                        for (p, o) in owned.iter_mut().enumerate().skip(first).take(n) {
                            prop_assert!(o.is_none(), "page {p} handed out twice");
                            *o = Some(first);
                        }
                        runs.push((first, n));
                    }
                    None => {
                        // Only when no free run of n pages exists.
                        let free_run = owned
                            .windows(n.max(1))
                            .any(|w| w.iter().all(Option::is_none));
                        prop_assert!(n == 0 || n > total || !free_run);
                    }
                }
            } else {
                let (first, n) = runs.swap_remove(pick % runs.len());
                free(&mut bitmap, first, n);
                for o in owned.iter_mut().skip(first).take(n) {
                    *o = None;
                }
            }
            prop_assert_eq!(in_use(&bitmap, total), owned.iter().filter(|o| o.is_some()).count());
        }
    }
}

#[test]
fn edges() {
    let mut bitmap = vec![0u64; 2];
    assert_eq!(alloc(&mut bitmap, 100, 0), None);
    assert_eq!(alloc(&mut bitmap, 100, 101), None);
    assert_eq!(alloc(&mut bitmap, 100, 100), Some(0));
    assert_eq!(alloc(&mut bitmap, 100, 1), None);
    free(&mut bitmap, 0, 1000);
    // A total beyond the bitmap is clamped to it.
    let mut small = vec![0u64; 1];
    assert_eq!(alloc(&mut small, 1000, 65), None);
    assert_eq!(alloc(&mut small, 1000, 64), Some(0));
}
