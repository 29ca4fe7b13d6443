//! Tests of the connect-time rules, and of their agreement with the uapi header.

use crate::rules::*;
use std::collections::HashMap;

fn rule(action: PortAction, low: u16, high: u16) -> PortRule {
    PortRule::new(action, low, high).unwrap()
}

fn v4(a: u8, b: u8, c: u8, d: u8) -> Ip {
    Ip::V4([a, b, c, d])
}

fn v6(s: &str) -> Ip {
    Ip::V6(s.parse::<std::net::Ipv6Addr>().unwrap().octets())
}

#[test]
fn port_rule_validation() {
    assert_eq!(
        PortRule::new(PortAction::Include, 0, 10),
        Err(RuleError::PortZero)
    );
    assert_eq!(
        PortRule::new(PortAction::Exclude, 10, 9),
        Err(RuleError::Reversed)
    );
    let r = rule(PortAction::Exclude, 22, 22);
    assert!(r.contains(22) && !r.contains(21) && !r.contains(23));
    let all = rule(PortAction::Include, 1, 65535);
    assert!(all.contains(1) && all.contains(65535) && !all.contains(0));
    assert!(!RuleError::PortZero.message().is_empty());
}

#[test]
fn no_rules_allow_every_port() {
    for port in [1, 22, 80, 65535] {
        assert!(port_allowed(&[], port));
    }
}

#[test]
fn exclude_rules() {
    let rules = [
        rule(PortAction::Exclude, 22, 22),
        rule(PortAction::Exclude, 6000, 6010),
    ];
    assert!(!port_allowed(&rules, 22));
    assert!(!port_allowed(&rules, 6000));
    assert!(!port_allowed(&rules, 6005));
    assert!(!port_allowed(&rules, 6010));
    assert!(port_allowed(&rules, 6011));
    assert!(port_allowed(&rules, 80));
}

#[test]
fn include_rules_restrict_to_the_included() {
    let rules = [
        rule(PortAction::Include, 5000, 5999),
        rule(PortAction::Include, 80, 80),
    ];
    assert!(port_allowed(&rules, 80));
    assert!(port_allowed(&rules, 5000));
    assert!(port_allowed(&rules, 5999));
    assert!(!port_allowed(&rules, 6000));
    assert!(!port_allowed(&rules, 443));
}

#[test]
fn exclude_wins_over_include_in_any_order() {
    let a = [
        rule(PortAction::Include, 5000, 5999),
        rule(PortAction::Exclude, 5500, 5500),
    ];
    let b = [a[1], a[0]];
    for rules in [&a[..], &b[..]] {
        assert!(!port_allowed(rules, 5500));
        assert!(port_allowed(rules, 5501));
        assert!(!port_allowed(rules, 6000));
    }
}

#[test]
fn port_allowed_matches_a_model_for_every_port() {
    let rules = [
        rule(PortAction::Include, 1000, 2000),
        rule(PortAction::Exclude, 1500, 1600),
        rule(PortAction::Include, 1550, 1550),
        rule(PortAction::Include, 65535, 65535),
    ];
    for port in 1..=u16::MAX {
        let model =
            !(1500..=1600).contains(&port) && ((1000..=2000).contains(&port) || port == 65535);
        assert_eq!(port_allowed(&rules, port), model, "port {port}");
    }
}

#[test]
fn canonical_addresses() {
    assert_eq!(v6("::ffff:10.1.2.3").canonical(), v4(10, 1, 2, 3));
    assert_eq!(v6("::1").canonical(), v6("::1"));
    assert_eq!(v6("fe80::1").canonical(), v6("fe80::1"));
    // Mapped only with all 80 bits before the ffff zero.
    assert_eq!(v6("::1:ffff:10.1.2.3").canonical(), v6("::1:ffff:10.1.2.3"));
    assert_eq!(v6("1::ffff:10.1.2.3").canonical(), v6("1::ffff:10.1.2.3"));
    assert_eq!(v6("::fffe:10.1.2.3").canonical(), v6("::fffe:10.1.2.3"));
    assert_eq!(v6("::ffff:0.0.0.0").canonical(), v4(0, 0, 0, 0));
    assert_eq!(v4(1, 2, 3, 4).canonical(), v4(1, 2, 3, 4));
    assert!(v4(127, 0, 0, 1).is_loopback());
    assert!(v4(127, 200, 1, 9).is_loopback());
    assert!(v6("::ffff:127.0.0.1").is_loopback());
    assert!(v6("::1").is_loopback());
    assert!(!v6("::2").is_loopback());
    assert!(!v4(128, 0, 0, 1).is_loopback());
    assert!(v4(0, 0, 0, 0).is_unspecified());
    assert!(v6("::").is_unspecified());
    assert!(!v6("::1").is_unspecified());
}

/// `decide` with a node map given as a `HashMap` and a set of local addresses.
fn run(
    rules: &[PortRule],
    map: &HashMap<Ip, NodeId>,
    local: &[Ip],
    dest: Ip,
    port: u16,
) -> Decision {
    run_published(rules, map, local, &HashMap::new(), dest, port)
}

/// The same, with the addresses reachable nodes published.
fn run_published(
    rules: &[PortRule],
    map: &HashMap<Ip, NodeId>,
    local: &[Ip],
    published: &HashMap<Ip, NodeId>,
    dest: Ip,
    port: u16,
) -> Decision {
    decide(
        rules,
        dest,
        port,
        LOCAL_NODE,
        map.is_empty(),
        |ip| map.get(&ip).copied(),
        |ip| local.contains(&ip),
        |ip| published.get(&ip).copied(),
    )
}

#[test]
fn published_addresses_stand_in_for_an_unloaded_map() {
    let map = HashMap::new();
    let local = [v4(10, 0, 0, 1)];
    let mut published = HashMap::new();
    published.insert(v4(10, 0, 0, 2), 1);
    published.insert(v6("fd00::2"), 1);
    published.insert(v4(10, 0, 0, 3), 2);
    let go = |dest| run_published(&[], &map, &local, &published, dest, 80);
    assert_eq!(go(v4(10, 0, 0, 2)), Decision::Sci(1));
    assert_eq!(go(v6("::ffff:10.0.0.2")), Decision::Sci(1));
    assert_eq!(go(v6("fd00::2")), Decision::Sci(1));
    assert_eq!(go(v4(10, 0, 0, 3)), Decision::Sci(2));
    assert_eq!(
        go(v4(10, 0, 0, 4)),
        Decision::Native(FallbackReason::NotMapped)
    );
    // This node's own addresses stay its own, whatever a peer claims.
    published.insert(v4(10, 0, 0, 1), 2);
    published.insert(v4(127, 0, 0, 1), 2);
    let go = |dest| run_published(&[], &map, &local, &published, dest, 80);
    assert_eq!(go(v4(10, 0, 0, 1)), Decision::Sci(LOCAL_NODE));
    assert_eq!(go(v4(127, 0, 0, 1)), Decision::Sci(LOCAL_NODE));
    // Port rules come first.
    let rules = [rule(PortAction::Exclude, 80, 80)];
    assert_eq!(
        run_published(&rules, &map, &local, &published, v4(10, 0, 0, 2), 80),
        Decision::Native(FallbackReason::PortExcluded)
    );
}

#[test]
fn a_loaded_map_wins_over_published_addresses() {
    let mut map = HashMap::new();
    map.insert(v4(10, 0, 0, 2), 5);
    let mut published = HashMap::new();
    published.insert(v4(10, 0, 0, 2), 1);
    published.insert(v4(10, 0, 0, 3), 1);
    let go = |dest| run_published(&[], &map, &[], &published, dest, 80);
    assert_eq!(go(v4(10, 0, 0, 2)), Decision::Sci(5));
    assert_eq!(
        go(v4(10, 0, 0, 3)),
        Decision::Native(FallbackReason::NotMapped)
    );
}

#[test]
fn unconfigured_map_means_the_local_node_only() {
    let map = HashMap::new();
    let local = [v4(10, 0, 2, 15), v6("fd00::15")];
    let sci = Decision::Sci(LOCAL_NODE);
    assert_eq!(run(&[], &map, &local, v4(127, 0, 0, 1), 80), sci);
    assert_eq!(run(&[], &map, &local, v4(127, 1, 2, 3), 80), sci);
    assert_eq!(run(&[], &map, &local, v6("::1"), 80), sci);
    assert_eq!(run(&[], &map, &local, v4(0, 0, 0, 0), 80), sci);
    assert_eq!(run(&[], &map, &local, v4(10, 0, 2, 15), 80), sci);
    assert_eq!(run(&[], &map, &local, v6("::ffff:10.0.2.15"), 80), sci);
    assert_eq!(run(&[], &map, &local, v6("fd00::15"), 80), sci);
    assert_eq!(
        run(&[], &map, &local, v4(10, 0, 2, 16), 80),
        Decision::Native(FallbackReason::NotMapped)
    );
}

#[test]
fn configured_map_is_all_that_counts() {
    let mut map = HashMap::new();
    map.insert(v4(192, 168, 1, 2), 2);
    map.insert(v6("fd00::3"), 3);
    let local = [v4(10, 0, 2, 15)];
    assert_eq!(
        run(&[], &map, &local, v4(192, 168, 1, 2), 80),
        Decision::Sci(2)
    );
    assert_eq!(
        run(&[], &map, &local, v6("::ffff:192.168.1.2"), 80),
        Decision::Sci(2)
    );
    assert_eq!(run(&[], &map, &local, v6("fd00::3"), 80), Decision::Sci(3));
    // Once a map is loaded, the local node's addresses must be in it too.
    for dest in [
        v4(127, 0, 0, 1),
        v4(10, 0, 2, 15),
        v6("::1"),
        v4(192, 168, 1, 3),
    ] {
        assert_eq!(
            run(&[], &map, &local, dest, 80),
            Decision::Native(FallbackReason::NotMapped),
            "{dest:?}"
        );
    }
}

#[test]
fn ports_are_checked_before_addresses() {
    let mut map = HashMap::new();
    map.insert(v4(192, 168, 1, 2), 2);
    let rules = [
        rule(PortAction::Include, 5000, 5999),
        rule(PortAction::Exclude, 5555, 5555),
    ];
    let excluded = Decision::Native(FallbackReason::PortExcluded);
    assert_eq!(run(&rules, &map, &[], v4(192, 168, 1, 2), 5555), excluded);
    assert_eq!(run(&rules, &map, &[], v4(192, 168, 1, 2), 80), excluded);
    assert_eq!(run(&rules, &map, &[], v4(8, 8, 8, 8), 80), excluded);
    assert_eq!(
        run(&rules, &map, &[], v4(192, 168, 1, 2), 5000),
        Decision::Sci(2)
    );
    assert_eq!(
        run(&rules, &map, &[], v4(8, 8, 8, 8), 5000),
        Decision::Native(FallbackReason::NotMapped)
    );
    let empty = HashMap::new();
    assert_eq!(run(&rules, &empty, &[], v4(127, 0, 0, 1), 5555), excluded);
    assert_eq!(
        run(&rules, &empty, &[], v4(127, 0, 0, 1), 5001),
        Decision::Sci(LOCAL_NODE)
    );
}

#[test]
fn the_local_check_is_asked_only_when_needed() {
    let mut map = HashMap::new();
    map.insert(v4(192, 168, 1, 2), 2);
    let asked = std::cell::Cell::new(0);
    let count = |_: Ip| {
        asked.set(asked.get() + 1);
        false
    };
    let published = std::cell::Cell::new(0);
    let peers = |_: Ip| {
        published.set(published.get() + 1);
        None
    };
    decide(&[], v4(127, 0, 0, 1), 1, 0, true, |_| None, count, peers);
    decide(&[], v4(1, 2, 3, 4), 1, 0, false, |_| None, count, peers);
    assert_eq!((asked.get(), published.get()), (0, 0));
    decide(&[], v4(1, 2, 3, 4), 1, 0, true, |_| None, count, peers);
    assert_eq!((asked.get(), published.get()), (1, 1));
    decide(&[], v4(1, 2, 3, 4), 1, 0, true, |_| None, |_| true, peers);
    assert_eq!(
        published.get(),
        1,
        "a local address is not looked up in the fabric"
    );
    // The local node is the fabric's.
    assert_eq!(
        decide(
            &[],
            v4(127, 0, 0, 1),
            1,
            7,
            true,
            |_| None,
            |_| false,
            |_| None
        ),
        Decision::Sci(7)
    );
}

#[test]
fn reason_names_round_trip() {
    for (i, r) in FallbackReason::ALL.iter().enumerate() {
        assert_eq!(r.as_u32() as usize, i);
        assert_eq!(FallbackReason::from_u32(r.as_u32()), Some(*r));
        assert_eq!(FallbackReason::from_name(r.name()), Some(*r));
    }
    assert_eq!(FallbackReason::from_u32(FallbackReason::COUNT as u32), None);
    assert_eq!(FallbackReason::from_name("bogus"), None);
    assert_eq!(PortAction::from_name("include"), Some(PortAction::Include));
    assert_eq!(PortAction::from_u8(2), Some(PortAction::Exclude));
    assert_eq!(PortAction::from_u8(0), None);
    assert_eq!(PortAction::Exclude.name(), "exclude");
}

/// The value of `NAME = N` or `#define NAME N` in the uapi header.
fn header_value(header: &str, name: &str) -> Option<u32> {
    header.lines().find_map(|line| {
        let line = line.trim();
        let rest = line
            .strip_prefix("#define ")
            .unwrap_or(line)
            .strip_prefix(name)?;
        if !rest.starts_with([' ', '\t', '=']) {
            return None;
        }
        let value = rest.trim_start_matches([' ', '\t', '=']);
        let digits: String = value.chars().take_while(|c| c.is_ascii_digit()).collect();
        digits.parse().ok()
    })
}

#[test]
fn values_agree_with_the_uapi_header() {
    let header = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../uapi/linux/af_sci.h"
    ))
    .unwrap();
    for r in FallbackReason::ALL {
        let name = format!("SCI_FALLBACK_{}", r.name().replace('-', "_").to_uppercase());
        assert_eq!(header_value(&header, &name), Some(r.as_u32()), "{name}");
    }
    assert_eq!(
        header_value(&header, "SCI_PORT_INCLUDE"),
        Some(PortAction::Include.as_u8().into())
    );
    assert_eq!(
        header_value(&header, "SCI_PORT_EXCLUDE"),
        Some(PortAction::Exclude.as_u8().into())
    );
    assert_eq!(
        header_value(&header, "SCI_NODES_MAX"),
        Some(NODES_MAX as u32)
    );
    assert_eq!(
        header_value(&header, "SCI_PORT_RULES_MAX"),
        Some(PORT_RULES_MAX as u32)
    );
}

#[test]
fn sockaddr_parsing() {
    let mut sin = [0u8; 16];
    sin[..2].copy_from_slice(&AF_INET.to_ne_bytes());
    sin[2..4].copy_from_slice(&8080u16.to_be_bytes());
    sin[4..8].copy_from_slice(&[127, 0, 0, 1]);
    assert_eq!(sockaddr_ip_port(&sin), Some((v4(127, 0, 0, 1), 8080)));
    assert_eq!(sockaddr_ip_port(&sin[..15]), None);
    assert_eq!(sockaddr_ip_port(&sin[..1]), None);
    assert_eq!(sockaddr_ip_port(&[]), None);

    let mut sin6 = [0u8; 28];
    sin6[..2].copy_from_slice(&AF_INET6.to_ne_bytes());
    sin6[2..4].copy_from_slice(&443u16.to_be_bytes());
    sin6[8..24].copy_from_slice(&"fd00::7".parse::<std::net::Ipv6Addr>().unwrap().octets());
    assert_eq!(sockaddr_ip_port(&sin6), Some((v6("fd00::7"), 443)));
    assert_eq!(sockaddr_ip_port(&sin6[..24]), Some((v6("fd00::7"), 443)));
    assert_eq!(sockaddr_ip_port(&sin6[..23]), None);

    let mut unspec = sin;
    unspec[..2].copy_from_slice(&0u16.to_ne_bytes());
    assert_eq!(sockaddr_ip_port(&unspec), None);
}
