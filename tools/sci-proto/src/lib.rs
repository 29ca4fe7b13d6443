//! Host build of the af_sci protocol core.
//!
//! The code lives in `rust/proto/` and is compiled into the kernel module as
//! well; this crate includes it unchanged, with the lints that keep it
//! panic-free and kernel-clean turned into errors, and holds its tests
//! (`cargo test -p sci-proto`). The items are `pub(crate)` (the kernel builds
//! with `-Wunreachable_pub`), so the tests live inside this crate. The public
//! modules: [`manager`], what the host's ivshmem server does to a live region, and
//! [`layout`], where every word of a live region is (for `tools/sci-hostile`).
#![cfg_attr(not(test), no_std)]

// The kernel module uses the core piecemeal; here nothing outside the tests does (so
// neither are its re-exports).
#[allow(dead_code, unused_imports)]
#[deny(
    missing_docs,
    clippy::missing_docs_in_private_items,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::unreachable,
    clippy::todo,
    clippy::unimplemented,
    clippy::float_arithmetic,
    clippy::cast_possible_truncation,
    clippy::undocumented_unsafe_blocks,
    unsafe_code
)]
#[path = "../../../rust/proto/mod.rs"]
pub(crate) mod proto;

pub mod layout;
pub mod manager;

#[cfg(test)]
mod tests;
