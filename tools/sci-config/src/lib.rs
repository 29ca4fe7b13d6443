//! Host build of af_sci's connect-time rules.
//!
//! The code lives in `rust/config/rules.rs` and is compiled into the kernel module as
//! well (`rust/node_map.rs`); this crate includes it unchanged, with the lints that keep
//! it panic-free turned into errors, and holds its tests. `scictl` uses it to check its
//! configuration files and to name fallback reasons.
#![cfg_attr(not(test), no_std)]

#[deny(
    missing_docs,
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
    unsafe_code
)]
#[path = "../../../rust/config/rules.rs"]
pub mod rules;

#[cfg(test)]
mod tests;
