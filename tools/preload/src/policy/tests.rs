//! Unit tests of the pure decisions: which sockets are rewritten, to what, and the
//! lines the shim prints about it.

use super::*;

const TCP: c_int = libc::SOCK_STREAM;

fn cfg(family: FamilyStatus) -> Config {
    Config {
        debug: false,
        disabled: false,
        family,
        program: ProgramState::Sci,
        dgram: false,
    }
}

// --- is_udp_socket -----------------------------------------------------

#[test]
fn inet_datagram_sockets_of_protocol_0_or_udp_are_udp() {
    let dgram = libc::SOCK_DGRAM;
    assert!(is_udp_socket(libc::AF_INET, dgram, 0));
    assert!(is_udp_socket(
        libc::AF_INET6,
        dgram | libc::SOCK_CLOEXEC,
        libc::IPPROTO_UDP
    ));
    assert!(!is_udp_socket(libc::AF_INET, dgram, libc::IPPROTO_UDPLITE));
    assert!(!is_udp_socket(libc::AF_UNIX, dgram, 0));
    assert!(!is_udp_socket(libc::AF_INET, TCP, 0));
}

#[test]
fn udp_sockets_are_rewritten_only_with_sci_dgram() {
    let c = cfg(FamilyStatus::Loaded(27));
    assert_eq!(
        target_family(&c, libc::AF_INET, libc::SOCK_DGRAM, 0),
        Err(Keep::NotTcp)
    );
    let c = Config { dgram: true, ..c };
    assert_eq!(
        target_family(&c, libc::AF_INET, libc::SOCK_DGRAM, 0),
        Ok(27)
    );
    let c = Config {
        program: ProgramState::Tcp,
        ..c
    };
    assert_eq!(
        target_family(&c, libc::AF_INET6, libc::SOCK_DGRAM, 0),
        Err(Keep::Rule)
    );
}

// --- is_tcp_socket -----------------------------------------------------

#[test]
fn inet_and_inet6_stream_sockets_are_tcp() {
    assert!(is_tcp_socket(libc::AF_INET, TCP, 0));
    assert!(is_tcp_socket(libc::AF_INET6, TCP, 0));
    assert!(is_tcp_socket(libc::AF_INET, TCP, libc::IPPROTO_TCP));
    assert!(is_tcp_socket(libc::AF_INET6, TCP, libc::IPPROTO_TCP));
}

#[test]
fn nonblock_and_cloexec_flags_do_not_hide_a_stream_socket() {
    assert!(is_tcp_socket(libc::AF_INET, TCP | libc::SOCK_NONBLOCK, 0));
    assert!(is_tcp_socket(libc::AF_INET, TCP | libc::SOCK_CLOEXEC, 0));
    assert!(is_tcp_socket(
        libc::AF_INET6,
        TCP | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
        6
    ));
}

#[test]
fn udp_raw_and_seqpacket_sockets_are_not_tcp() {
    assert!(!is_tcp_socket(libc::AF_INET, libc::SOCK_DGRAM, 0));
    assert!(!is_tcp_socket(
        libc::AF_INET6,
        libc::SOCK_DGRAM,
        libc::IPPROTO_UDP
    ));
    assert!(!is_tcp_socket(
        libc::AF_INET,
        libc::SOCK_RAW,
        libc::IPPROTO_TCP
    ));
    assert!(!is_tcp_socket(libc::AF_INET, libc::SOCK_SEQPACKET, 0));
}

#[test]
fn stream_sockets_with_other_protocols_are_not_tcp() {
    // MPTCP and SCTP stream sockets must stay what they are.
    assert!(!is_tcp_socket(libc::AF_INET, TCP, libc::IPPROTO_MPTCP));
    assert!(!is_tcp_socket(libc::AF_INET6, TCP, libc::IPPROTO_SCTP));
    assert!(!is_tcp_socket(libc::AF_INET, TCP, libc::IPPROTO_UDP));
}

#[test]
fn other_families_are_not_tcp() {
    assert!(!is_tcp_socket(libc::AF_UNIX, TCP, 0));
    assert!(!is_tcp_socket(libc::AF_NETLINK, libc::SOCK_RAW, 0));
    assert!(!is_tcp_socket(libc::AF_PACKET, TCP, 0));
    assert!(!is_tcp_socket(27, TCP, 0));
}

#[test]
fn unknown_type_flags_are_not_masked_away() {
    // Only SOCK_NONBLOCK and SOCK_CLOEXEC are ignored.
    assert!(!is_tcp_socket(libc::AF_INET, TCP | 0x100, 0));
}

// --- target_family -----------------------------------------------------

#[test]
fn tcp_socket_is_rewritten_to_the_loaded_family() {
    let c = cfg(FamilyStatus::Loaded(27));
    assert_eq!(target_family(&c, libc::AF_INET, TCP, 0), Ok(27));
    assert_eq!(
        target_family(&c, libc::AF_INET6, TCP | libc::SOCK_CLOEXEC, 6),
        Ok(27)
    );
}

#[test]
fn non_tcp_socket_is_kept_silently_even_when_loaded() {
    let c = cfg(FamilyStatus::Loaded(27));
    assert_eq!(
        target_family(&c, libc::AF_INET, libc::SOCK_DGRAM, 0),
        Err(Keep::NotTcp)
    );
    assert_eq!(Keep::NotTcp.notice(), None);
}

#[test]
fn the_rules_keep_a_program_on_tcp_or_let_it_through() {
    let with = |program| Config {
        program,
        ..cfg(FamilyStatus::Loaded(27))
    };
    assert_eq!(
        target_family(&with(ProgramState::Tcp), libc::AF_INET, TCP, 0),
        Err(Keep::Rule)
    );
    assert_eq!(
        target_family(&with(ProgramState::BadRules), libc::AF_INET6, TCP, 0),
        Err(Keep::BadRules)
    );
    for program in [ProgramState::Sci, ProgramState::PerSocket] {
        assert_eq!(target_family(&with(program), libc::AF_INET, TCP, 0), Ok(27));
    }
    assert!(Keep::Rule.notice().unwrap().contains("preload.conf"));
    assert!(Keep::BadRules
        .notice()
        .unwrap()
        .contains("scictl load --check"));
}

#[test]
fn disable_wins_over_a_loaded_module() {
    let c = Config {
        debug: true,
        disabled: true,
        family: FamilyStatus::Loaded(27),
        program: ProgramState::Sci,
        dgram: true,
    };
    assert_eq!(
        target_family(&c, libc::AF_INET, TCP, 0),
        Err(Keep::Disabled)
    );
}

#[test]
fn missing_family_file_keeps_sockets_and_says_not_loaded() {
    let c = cfg(FamilyStatus::Missing);
    assert_eq!(
        target_family(&c, libc::AF_INET, TCP, 0),
        Err(Keep::NotLoaded)
    );
    assert_eq!(
        Keep::NotLoaded.notice(),
        Some("sci-preload: af_sci module not loaded; sockets stay AF_INET\n")
    );
}

#[test]
fn unreadable_or_invalid_family_file_keeps_sockets() {
    assert_eq!(
        target_family(&cfg(FamilyStatus::Unreadable), libc::AF_INET, TCP, 0),
        Err(Keep::Unreadable)
    );
    assert_eq!(
        target_family(&cfg(FamilyStatus::Invalid), libc::AF_INET6, TCP, 0),
        Err(Keep::Invalid)
    );
}

#[test]
fn every_keep_reason_but_not_tcp_has_a_single_line_notice() {
    for k in [
        Keep::Disabled,
        Keep::NotLoaded,
        Keep::Unreadable,
        Keep::Invalid,
    ] {
        let n = k.notice().expect("notice");
        assert!(n.starts_with("sci-preload: "), "{n:?}");
        assert!(n.ends_with('\n'), "{n:?}");
        assert_eq!(n.matches('\n').count(), 1, "{n:?}");
    }
}

// --- parse_family ------------------------------------------------------

#[test]
fn parse_family_accepts_kernel_format_with_newline() {
    assert_eq!(parse_family(b"27\n"), Some(27));
    assert_eq!(parse_family(b"10\n"), Some(10));
}

#[test]
fn parse_family_accepts_number_without_newline() {
    assert_eq!(parse_family(b"27"), Some(27));
}

#[test]
fn parse_family_accepts_range_bounds() {
    assert_eq!(parse_family(b"1\n"), Some(1));
    assert_eq!(parse_family(b"255\n"), Some(255));
}

#[test]
fn parse_family_rejects_out_of_range_values() {
    assert_eq!(parse_family(b"0\n"), None);
    assert_eq!(parse_family(b"256\n"), None);
    assert_eq!(parse_family(b"65535\n"), None);
    assert_eq!(parse_family(b"4294967296\n"), None);
    assert_eq!(parse_family(b"99999999999999999999\n"), None);
}

#[test]
fn parse_family_rejects_empty_text() {
    assert_eq!(parse_family(b""), None);
    assert_eq!(parse_family(b"\n"), None);
}

#[test]
fn parse_family_rejects_signs_spaces_and_garbage() {
    for text in [
        &b"-27\n"[..],
        b"+27\n",
        b" 27\n",
        b"27 \n",
        b"27\n\n",
        b"27\r\n",
        b"0x1b\n",
        b"27abc",
        b"twenty-seven\n",
        b"2\x007\n",
        b"\xff\xfe",
    ] {
        assert_eq!(parse_family(text), None, "{text:?}");
    }
}

#[test]
fn parse_family_tolerates_leading_zeros() {
    assert_eq!(parse_family(b"027\n"), Some(27));
}

// --- env_flag ----------------------------------------------------------

#[test]
fn env_flag_is_on_for_one_and_other_non_empty_values() {
    assert!(env_flag(Some(b"1")));
    assert!(env_flag(Some(b"yes")));
}

#[test]
fn env_flag_is_off_when_unset_empty_or_zero() {
    assert!(!env_flag(None));
    assert!(!env_flag(Some(b"")));
    assert!(!env_flag(Some(b"0")));
}

// --- Config encoding ---------------------------------------------------

#[test]
fn config_round_trips_through_its_state_word() {
    for family in [
        FamilyStatus::Loaded(1),
        FamilyStatus::Loaded(27),
        FamilyStatus::Loaded(255),
        FamilyStatus::Missing,
        FamilyStatus::Unreadable,
        FamilyStatus::Invalid,
    ] {
        for debug in [false, true] {
            for disabled in [false, true] {
                for program in [
                    ProgramState::Sci,
                    ProgramState::PerSocket,
                    ProgramState::Tcp,
                    ProgramState::BadRules,
                ] {
                    for dgram in [false, true] {
                        let c = Config {
                            debug,
                            disabled,
                            family,
                            program,
                            dgram,
                        };
                        let word = c.encode();
                        assert_ne!(word, 0, "{c:?}");
                        assert_eq!(Config::decode(word), Some(c));
                    }
                }
            }
        }
    }
}

#[test]
fn zero_state_word_means_not_initialised() {
    assert_eq!(Config::decode(0), None);
}

// --- debug lines ---------------------------------------------------------

#[test]
fn rewritten_line_names_fd_and_both_families() {
    let mut b = LineBuf::new();
    rewritten_line(&mut b, 5, libc::AF_INET, 27);
    assert_eq!(
        b.finish(),
        b"sci-preload: fd 5: family 2 (AF_INET) -> 27 (AF_SCI)\n"
    );
}

#[test]
fn fallback_line_names_fd_and_kept_family() {
    let mut b = LineBuf::new();
    fallback_line(&mut b, 7, libc::AF_INET6, 27);
    let line = core::str::from_utf8(b.finish()).unwrap();
    assert!(line.contains("fd 7: family 10 (AF_INET6) kept"), "{line}");
    assert_eq!(line.matches('\n').count(), 1);
}

#[test]
fn failed_line_names_errno() {
    let mut b = LineBuf::new();
    failed_line(&mut b, libc::AF_INET, 27, libc::EMFILE);
    let line = core::str::from_utf8(b.finish()).unwrap();
    assert!(
        line.ends_with(&format!("errno {}\n", libc::EMFILE)),
        "{line}"
    );
}

#[test]
fn line_buf_truncates_long_text_and_still_ends_in_newline() {
    use core::fmt::Write;
    let mut b = LineBuf::new();
    for _ in 0..100 {
        b.write_str("0123456789").unwrap();
    }
    assert_eq!(b.as_bytes().len(), LineBuf::CAPACITY);
    let line = b.finish();
    assert_eq!(line.len(), LineBuf::CAPACITY);
    assert_eq!(line.last(), Some(&b'\n'));
}

#[test]
fn line_buf_finish_adds_exactly_one_newline() {
    use core::fmt::Write;
    let mut b = LineBuf::new();
    b.write_str("x\n").unwrap();
    assert_eq!(b.finish(), b"x\n");
    let mut e = LineBuf::new();
    assert_eq!(e.finish(), b"\n");
}
