// SPDX-License-Identifier: GPL-2.0

//! Adaptive spinning: whether a blocking send or receive that must wait polls its queue
//! first, and for how long (the seed's poll-then-sleep, made to choose for itself).
//!
//! A spinning reader has asked for no doorbell, so its writer rings none: between two
//! machines a short wait then costs no interrupt and no wake-up (`Documentation/af_sci.rst`,
//! `spin_us`). A spin that ends empty-handed is a CPU burnt for nothing, so a direction of
//! a connection keeps spinning only while its recent waits ended within its budget.
//!
//! The budget is what a sleep costs, as competitive spinning has it (spin as long as
//! blocking would cost, then block): [`WAKE_COST_FACTOR`] times the wake-up latency this
//! direction's sleeps measured (from the wake-up to the task running again: this end's
//! part of a sleep's cost, the peer's sleep and the doorbell's delivery being about as
//! much again), within [`ADAPTIVE_BUDGET_US`]..=[`MAX_ADAPTIVE_BUDGET_US`]. On hardware a
//! wake-up takes microseconds and the floor decides; in an emulated guest it takes a
//! hundred or more, and a spin of the floor's length could never outlast the peer's sleep:
//! two ends that both sleep would never find out that spinning pays.
//!
//! After [`MISSES_BEFORE_BACKOFF`] spins in a row that did not,
//! it spins only on every 2nd, 4th, ... up to every 2^[`MAX_BACKOFF_LOG2`]th wait, to
//! notice when waits become short again; one spin that ends in time restores it. A CPU
//! with other tasks waiting to run never spins (the time is theirs, and on one CPU the
//! task being waited for may be one of them). The cost is bounded: a connection whose
//! waits are all long spins at most one budget every 64 waits.
//!
//! An administrator's fixed spin (`spin_us` > 0, `SCI_SPIN_US`) is used as it is.

/// The shortest budget of an adaptive spin, in microseconds: a few cross-machine round
/// trips of a shared-memory fabric, far less than the sleep and wake-up it saves.
pub(crate) const ADAPTIVE_BUDGET_US: u32 = 100;

/// The longest budget of an adaptive spin, in microseconds, whatever a wake-up costs.
pub(crate) const MAX_ADAPTIVE_BUDGET_US: u32 = 1000;

/// A spin may last this many of this end's measured wake-ups.
pub(crate) const WAKE_COST_FACTOR: u32 = 4;

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
    /// The wake-up latency of this direction's recent sleeps, in microseconds (a moving
    /// average; 0: none measured yet).
    wake_us: u32,
}

impl SpinHistory {
    /// No history: the first waits spin.
    pub(crate) const fn new() -> Self {
        Self {
            misses: 0,
            waits: 0,
            wake_us: 0,
        }
    }

    /// The budget of an adaptive spin: [`WAKE_COST_FACTOR`] measured wake-ups, within
    /// [`ADAPTIVE_BUDGET_US`]..=[`MAX_ADAPTIVE_BUDGET_US`].
    pub(crate) fn budget(&self) -> u32 {
        self.wake_us
            .saturating_mul(WAKE_COST_FACTOR)
            .clamp(ADAPTIVE_BUDGET_US, MAX_ADAPTIVE_BUDGET_US)
    }

    /// What a sleep of this direction cost: `us` from the wake-up to running again (0:
    /// nothing woke it, which says nothing). Averaged over the last few (a quarter each).
    pub(crate) fn record_wake(&mut self, us: u32) {
        if us == 0 {
            return;
        }
        let us = us.min(MAX_ADAPTIVE_BUDGET_US);
        self.wake_us = match self.wake_us {
            0 => us,
            avg => avg.saturating_sub(avg / 4).saturating_add(us / 4),
        };
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
            return self.budget();
        };
        // Backed off: every 2^k-th wait probes, k growing with the misses.
        let k = over.saturating_add(1).min(MAX_BACKOFF_LOG2);
        self.waits = self.waits.wrapping_add(1);
        let mask = (1u32 << k).wrapping_sub(1);
        if self.waits & mask == 0 {
            self.budget()
        } else {
            0
        }
    }

    /// What a spin of [`SpinHistory::plan`]'s found: the awaited event (`hit`) or not.
    pub(crate) fn record(&mut self, hit: bool) {
        if hit {
            // The wake-up's cost stays: it is the machine's, not the waits'.
            self.misses = 0;
            self.waits = 0;
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

/// One direction's adaptive spinning as `fdinfo` shows it: its budget, the wake-up
/// latency that sized it, and whether it backed off.
impl core::fmt::Display for SpinHistory {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let backed_off = if self.backed_off() {
            ", backed off"
        } else {
            ""
        };
        write!(
            f,
            "budget {} us (wake-up {} us){backed_off}",
            self.budget(),
            self.wake_us
        )
    }
}
