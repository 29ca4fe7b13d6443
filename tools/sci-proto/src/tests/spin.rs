//! Adaptive spinning (`rust/proto/spin.rs`): when a wait spins, and how its cost stays
//! bounded when spins do not pay.

use crate::proto::spin::{
    SpinHistory, SpinSetting, ADAPTIVE_BUDGET_US, MAX_ADAPTIVE_BUDGET_US, MAX_BACKOFF_LOG2,
    MISSES_BEFORE_BACKOFF, WAKE_COST_FACTOR,
};

/// Plans `n` waits whose spins all end as `hit` says; returns how many spun.
fn run(h: &mut SpinHistory, n: u32, hit: bool) -> u32 {
    let mut spun = 0;
    for _ in 0..n {
        let us = h.plan(SpinSetting::Adaptive, false);
        if us > 0 {
            assert_eq!(us, ADAPTIVE_BUDGET_US);
            spun += 1;
            h.record(hit);
        }
    }
    spun
}

#[test]
fn short_waits_keep_spinning() {
    let mut h = SpinHistory::new();
    assert_eq!(run(&mut h, 1000, true), 1000);
    assert!(!h.backed_off());
}

#[test]
fn a_fixed_setting_is_used_as_it_is() {
    let mut h = SpinHistory::new();
    for _ in 0..10 {
        h.record(false);
    }
    assert_eq!(h.plan(SpinSetting::Fixed(0), false), 0);
    assert_eq!(h.plan(SpinSetting::Fixed(250), false), 250);
    // The administrator's spin is not the scheduler's business.
    assert_eq!(h.plan(SpinSetting::Fixed(250), true), 250);
}

#[test]
fn a_contended_cpu_never_spins_adaptively() {
    let mut h = SpinHistory::new();
    for _ in 0..100 {
        assert_eq!(h.plan(SpinSetting::Adaptive, true), 0);
    }
    // And that says nothing about the waits: the next free wait spins.
    assert_eq!(h.plan(SpinSetting::Adaptive, false), ADAPTIVE_BUDGET_US);
}

#[test]
fn long_waits_back_off_to_one_spin_in_64() {
    let mut h = SpinHistory::new();
    // The first misses spin every time, then fewer and fewer.
    assert_eq!(run(&mut h, u32::from(MISSES_BEFORE_BACKOFF), false), 3);
    assert!(h.backed_off());
    // Settled: one spin every 2^MAX_BACKOFF_LOG2 waits.
    run(&mut h, 10_000, false);
    let period = 1u32 << MAX_BACKOFF_LOG2;
    let spun = run(&mut h, period * 100, false);
    assert_eq!(spun, 100, "one probe every {period} waits");
}

#[test]
fn one_short_wait_restores_spinning() {
    let mut h = SpinHistory::new();
    run(&mut h, 10_000, false);
    assert!(h.backed_off());
    // Waits become short: the next probe finds it, and every wait spins again.
    let mut waits = 0;
    while h.plan(SpinSetting::Adaptive, false) == 0 {
        waits += 1;
        assert!(waits <= 64, "a probe within 64 waits");
    }
    h.record(true);
    assert!(!h.backed_off());
    assert_eq!(run(&mut h, 100, true), 100);
}

#[test]
fn mixed_waits_cost_at_most_their_share() {
    // A seeded mix: 1 wait in 10 short. Spinning must not stay on for the long ones.
    let seed = 0x5eed_u64;
    let mut x = seed;
    let mut h = SpinHistory::new();
    let (mut spun, mut hits) = (0u32, 0u32);
    for _ in 0..100_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let short = x % 10 == 0;
        if h.plan(SpinSetting::Adaptive, false) > 0 {
            spun += 1;
            hits += u32::from(short);
            h.record(short);
        }
    }
    // Bounded well below one spin a wait (seed printed on failure).
    assert!(
        spun < 30_000,
        "seed {seed:#x}: {spun} spins of 100000 waits, {hits} paid"
    );
    assert!(hits > 0, "seed {seed:#x}: no spin ever paid");
}

#[test]
fn the_budget_follows_what_a_wake_up_costs() {
    let mut h = SpinHistory::new();
    // Nothing measured, or wake-ups of hardware (a few microseconds): the floor.
    assert_eq!(h.budget(), ADAPTIVE_BUDGET_US);
    h.record_wake(0);
    assert_eq!(h.budget(), ADAPTIVE_BUDGET_US, "no wake-up says nothing");
    h.record_wake(5);
    assert_eq!(h.budget(), ADAPTIVE_BUDGET_US);
    // An emulated guest's (150 us): four of them, so a spin outlasts the peer's sleep.
    let mut h = SpinHistory::new();
    h.record_wake(150);
    assert_eq!(h.plan(SpinSetting::Adaptive, false), 150 * WAKE_COST_FACTOR);
    // A moving average: one slow wake-up moves it a quarter of the way.
    h.record_wake(550);
    assert_eq!(h.budget(), (150 + 100) * WAKE_COST_FACTOR);
    // Never beyond the ceiling, however slow.
    for _ in 0..20 {
        h.record_wake(u32::MAX);
    }
    assert_eq!(h.budget(), MAX_ADAPTIVE_BUDGET_US);
}

#[test]
fn the_wake_up_cost_outlives_the_misses() {
    let mut h = SpinHistory::new();
    h.record_wake(200);
    run_budget(&mut h, 10, false);
    assert!(h.backed_off());
    // A hit restores spinning at the same budget: the cost is the machine's.
    h.record(true);
    assert!(!h.backed_off());
    assert_eq!(h.plan(SpinSetting::Adaptive, false), 200 * WAKE_COST_FACTOR);
}

/// [`run`] with whatever budget the history has.
fn run_budget(h: &mut SpinHistory, n: u32, hit: bool) {
    for _ in 0..n {
        if h.plan(SpinSetting::Adaptive, false) > 0 {
            h.record(hit);
        }
    }
}
