//! `addresses`: lies about the addresses the liar publishes (its node table entry and
//! address page), and the honest way to publish them, with which [`Liar::finish`] puts
//! them back.

use sci_proto::layout::{
    self, ADDR_PAGE_ADDRS, ADDR_PAGE_COUNT, ADDR_PAGE_MAGIC, ADDR_PAGE_MAGIC_OFF, PAGE_ADDRS,
    PUBLISHED_ADDRS,
};

use crate::Liar;

/// Addresses no node may stand behind, as published (IPv4 as `::ffff:a.b.c.d`).
const UNUSABLE: [[u8; 16]; 9] = [
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1],
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 0],
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 169, 254, 1, 1],
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 224, 0, 0, 1],
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 255, 255, 255, 255],
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
    [0; 16],
    [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
    [0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
];

impl Liar<'_> {
    /// `addresses`: one lie a step about the addresses the liar publishes, written as an
    /// honest node writes them (sequence odd, the words, sequence even) unless the lie is
    /// in the sequence itself:
    /// - `addr-torn`: the sequence left odd with a slot rewritten behind it (a reader
    ///   must give up, not wait for it to become even);
    /// - `addr-garbage`: random words;
    /// - `addr-unusable`: loopback, unspecified, link-local, multicast and broadcast
    ///   addresses, in both families;
    /// - `addr-claim`: what other nodes publish, the victim's own addresses first (the
    ///   victim keeps connections to its own addresses whatever a peer claims);
    /// - `addr-sequence`: the sequence alone, to a random even value, 0 ("nothing
    ///   published"), the largest even value or the largest;
    /// - `addr-page`: the address page (the first page of the liar's heap, the addresses
    ///   beyond the entry's): the magic right or not, a count within the page, past it,
    ///   or huge, and garbage, unusable and claimed addresses in it.
    pub(crate) fn addresses(&mut self) {
        let Some((seq, first)) = self.map.addresses(self.liar) else {
            return;
        };
        match self.rng.below(6) {
            5 => self.address_page(),
            0 => {
                let odd = layout::address_seq_open(self.load(seq));
                self.store(seq, odd, "addr-torn");
                let off = first + 16 * self.rng.index(PUBLISHED_ADDRS);
                let (lo, hi) = (self.rng.next_u64(), self.rng.next_u64());
                self.store(off, lo, "addr-torn");
                self.store(off + 8, hi, "addr-torn");
            }
            1 => {
                let addrs: Vec<[u64; 2]> = (0..PUBLISHED_ADDRS)
                    .map(|_| [self.rng.next_u64(), self.rng.next_u64()])
                    .collect();
                self.publish(&addrs, "addr-garbage");
            }
            2 => {
                let addrs: Vec<[u64; 2]> = (0..PUBLISHED_ADDRS)
                    .map(|_| layout::address_words(&UNUSABLE[self.rng.index(UNUSABLE.len())]))
                    .collect();
                self.publish(&addrs, "addr-unusable");
            }
            3 => {
                let mut claimed = self.others_addresses();
                if claimed.is_empty() {
                    return;
                }
                claimed.resize(PUBLISHED_ADDRS, claimed[0]);
                self.publish(&claimed[..PUBLISHED_ADDRS], "addr-claim");
            }
            _ => {
                let v = match self.rng.below(4) {
                    0 => self.rng.next_u64() & !1,
                    1 => 0,
                    2 => u64::MAX - 1,
                    _ => u64::MAX,
                };
                self.store(seq, v, "addr-sequence");
            }
        }
    }

    /// `addr-page`: see [`Liar::addresses`]; written under a proper sequence, so that
    /// the victim reads the lie rather than giving up on it.
    fn address_page(&mut self) {
        let (Some(page), Some(entry)) =
            (self.map.address_page(self.liar), self.saved_addrs.clone())
        else {
            return;
        };
        let magic = if self.rng.chance(3, 4) {
            ADDR_PAGE_MAGIC
        } else {
            self.rng.next_u64()
        };
        let count = match self.rng.below(4) {
            0 => PAGE_ADDRS as u64 + 1 + self.rng.below(8),
            1 => self.rng.next_u64(),
            _ => self.rng.below(PAGE_ADDRS as u64 + 1),
        };
        let claimed = self.others_addresses();
        let addrs: Vec<[u64; 2]> = (0..PAGE_ADDRS)
            .map(|_| match self.rng.below(3) {
                0 => [self.rng.next_u64(), self.rng.next_u64()],
                1 => layout::address_words(&UNUSABLE[self.rng.index(UNUSABLE.len())]),
                _ if !claimed.is_empty() => claimed[self.rng.index(claimed.len())],
                _ => [self.rng.next_u64(), self.rng.next_u64()],
            })
            .collect();
        self.publish_with(&entry, "addr-page", |me| {
            me.store(page + ADDR_PAGE_MAGIC_OFF, magic, "addr-page");
            me.store(page + ADDR_PAGE_COUNT, count, "addr-page");
            for (slot, [lo, hi]) in addrs.iter().enumerate() {
                let off = page + ADDR_PAGE_ADDRS + 16 * slot;
                me.store(off, *lo, "addr-page");
                me.store(off + 8, *hi, "addr-page");
            }
        });
    }

    /// What the other nodes publish in their node entries (two words each), the
    /// victim's first: what a liar claims.
    fn others_addresses(&self) -> Vec<[u64; 2]> {
        core::iter::once(self.victim)
            .chain((0..self.map.nodes() as u16).filter(|&n| n != self.victim))
            .filter(|&n| n != self.liar)
            .filter_map(|n| self.map.published(self.words, n))
            .flat_map(|slots| slots.into_iter().flatten())
            .map(|a| layout::address_words(&a))
            .collect()
    }

    /// Writes `addrs` (two words each) as the liar's published addresses, as an honest
    /// node does: the sequence made odd, the words, the sequence made even.
    fn publish(&mut self, addrs: &[[u64; 2]], what: &'static str) {
        self.publish_with(addrs, what, |_| {});
    }

    /// [`Liar::publish`], with `more` written under the same sequence (the address page).
    pub(crate) fn publish_with(
        &mut self,
        addrs: &[[u64; 2]],
        what: &'static str,
        more: impl FnOnce(&mut Self),
    ) {
        let Some((seq, first)) = self.map.addresses(self.liar) else {
            return;
        };
        let odd = layout::address_seq_open(self.load(seq));
        self.store(seq, odd, what);
        for (slot, [lo, hi]) in addrs.iter().take(PUBLISHED_ADDRS).enumerate() {
            self.store(first + 16 * slot, *lo, what);
            self.store(first + 16 * slot + 8, *hi, what);
        }
        more(self);
        self.store(seq, odd.wrapping_add(1), what);
    }
}
