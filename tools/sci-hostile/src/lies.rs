//! The lies, one file per [`Kind`](crate::Kind), each an `impl Liar` block that
//! [`Liar::step`](crate::Liar::step) calls into. Helpers several kinds share stay with the
//! kind they come from: forging frames in `frames`, the liar's node word in `nodeword`.

mod addresses;
mod cursors;
mod doorbells;
mod frames;
mod generations;
mod lengths;
mod nodeword;
mod random;
