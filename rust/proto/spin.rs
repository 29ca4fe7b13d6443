// SPDX-License-Identifier: GPL-2.0

//! Adaptive spinning: whether a blocking send or receive that must wait polls its queue
//! first, and for how long (the seed's poll-then-sleep, made to choose for itself).
//!
//! A spinning reader has asked for no doorbell, so its writer rings none: between two
//! machines a short wait then costs no interrupt and no wake-up (`Documentation/af_sci.rst`,
//! `spin_us`). A spin that ends empty-handed is a CPU burnt for nothing, so a direction of
//! a connection keeps spinning (up to [`ADAPTIVE_BUDGET_US`]) only while its recent waits
//! ended within that budget. After [`MISSES_BEFORE_BACKOFF`] spins in a row that did not,
//! it spins only on every 2nd, 4th, ... up to every 2^[`MAX_BACKOFF_LOG2`]th wait, to
//! notice when waits become short again; one spin that ends in time restores it. A CPU
//! with other tasks waiting to run never spins (the time is theirs, and on one CPU the
//! task being waited for may be one of them). The cost is bounded: a connection whose
//! waits are all long spins at most one budget every 64 waits.
//!
//! An administrator's fixed spin (`spin_us` > 0, `SCI_SPIN_US`) is used as it is.

/// The longest an adaptive spin polls, in microseconds: a few cross-machine round trips of
/// a shared-memory fabric, far less than the sleep and wake-up it saves.
pub(crate) const ADAPTIVE_BUDGET_US: u32 = 100;

/// Spins in a row that ended empty-handed before spinning backs off.
pub(crate) const MISSES_BEFORE_BACKOFF: u8 = 3;

/// At most every 2^this-th wait spins while backed off.
pub(crate) const MAX_BACKOFF_LOG2: u8 = 6;

/// How a socket's blocking calls spin.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum SpinSetting {
    /// Always this many microseconds (0: never).
    Fixed(u32),
    /// As the recent waits say ([`SpinHistory`]).
    Adaptive,
}

/// One direction's recent spins.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SpinHistory {
    /// Spins in a row that ended before the awaited event (capped).
    misses: u8,
    /// Waits seen while backed off (which of them probe).
    waits: u32,
}

impl SpinHistory {
    /// No history: the first waits spin.
    pub(crate) const fn new() -> Self {
        Self {
            misses: 0,
            waits: 0,
        }
    }

    /// How many microseconds this wait spins, under `setting`, when other tasks wait to
    /// run on this CPU (`contended`) or not.
    pub(crate) fn plan(&mut self, setting: SpinSetting, contended: bool) -> u32 {
        match setting {
            SpinSetting::Fixed(us) => us,
            SpinSetting::Adaptive if contended => 0,
            SpinSetting::Adaptive => self.adaptive(),
        }
    }

    /// [`SpinHistory::plan`] of an adaptive spin on an uncontended CPU.
    fn adaptive(&mut self) -> u32 {
        let Some(over) = self.misses.checked_sub(MISSES_BEFORE_BACKOFF) else {
            return ADAPTIVE_BUDGET_US;
        };
        // Backed off: every 2^k-th wait probes, k growing with the misses.
        let k = over.saturating_add(1).min(MAX_BACKOFF_LOG2);
        self.waits = self.waits.wrapping_add(1);
        let mask = (1u32 << k).wrapping_sub(1);
        if self.waits & mask == 0 {
            ADAPTIVE_BUDGET_US
        } else {
            0
        }
    }

    /// What a spin of [`SpinHistory::plan`]'s found: the awaited event (`hit`) or not.
    pub(crate) fn record(&mut self, hit: bool) {
        if hit {
            *self = Self::new();
        } else {
            let cap = MISSES_BEFORE_BACKOFF.saturating_add(MAX_BACKOFF_LOG2);
            self.misses = self.misses.saturating_add(1).min(cap);
        }
    }

    /// Whether spinning has backed off (for diagnostics and tests).
    pub(crate) fn backed_off(&self) -> bool {
        self.misses >= MISSES_BEFORE_BACKOFF
    }
}
