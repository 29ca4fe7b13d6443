//! Control frames, the mailbox ring and sequence ageing.

use proptest::prelude::*;

use super::TestSegment;
use crate::proto::frame::{
    bytes_to_words, words_to_bytes, CloseReason, ConnId, Frame, FrameError, FrameKind, QueueOffer,
    RejectReason, WireIp, FRAME_SIZE, FRAME_WORDS,
};
use crate::proto::mailbox::{
    self, age, next_generation, route, seq_older, Age, MailboxError, MailboxGeometry, MailboxPeek,
    MailboxRx, MailboxTx, Route, SlotView,
};
use crate::proto::segment::Segment;

fn conn_id() -> impl Strategy<Value = ConnId> {
    (0u32..u32::MAX, any::<u32>()).prop_map(|(slot, generation)| ConnId { slot, generation })
}

fn offer() -> impl Strategy<Value = QueueOffer> {
    (any::<u8>(), any::<u64>(), any::<u64>(), any::<u64>()).prop_map(
        |(ring_log2, rx_area, credit_area, start)| QueueOffer {
            ring_log2,
            rx_area,
            credit_area,
            start,
        },
    )
}

fn reject_reason() -> impl Strategy<Value = RejectReason> {
    prop_oneof![
        Just(RejectReason::NoListener),
        Just(RejectReason::BacklogFull),
        Just(RejectReason::NoResources),
        Just(RejectReason::Version),
        Just(RejectReason::Policy),
        Just(RejectReason::BadOffer),
    ]
}

fn close_reason() -> impl Strategy<Value = CloseReason> {
    prop_oneof![
        Just(CloseReason::Graceful),
        Just(CloseReason::Abort),
        Just(CloseReason::Abandoned),
    ]
}

/// Any IPv4 or IPv6 address.
fn ip() -> impl Strategy<Value = WireIp> {
    prop_oneof![
        any::<[u8; 4]>().prop_map(WireIp::V4),
        any::<[u8; 16]>().prop_map(WireIp::V6),
    ]
}

/// Loopback addresses for tests that do not care.
const LO: WireIp = WireIp::V4([127, 0, 0, 1]);

/// Any well-formed frame.
fn frame() -> impl Strategy<Value = Frame> {
    let req = (
        conn_id(),
        (ip(), any::<u16>()),
        (ip(), any::<u16>(), any::<u64>()),
        offer(),
        any::<bool>(),
    )
        .prop_map(|(src, from, to, o, datagram)| {
            let f = Frame::connect_request(src, from, to, o);
            if datagram {
                f.for_datagrams()
            } else {
                f
            }
        });
    (
        req,
        conn_id(),
        offer(),
        reject_reason(),
        close_reason(),
        conn_id(),
        0u8..4,
        any::<u32>(),
    )
        .prop_map(|(req, me, o, rr, cr, other, k, seq)| {
            let mut f = match k {
                0 => req,
                1 => Frame::accept(&req, me, o),
                2 => Frame::reject(&req, me, rr),
                _ => Frame::close(me, other, cr),
            };
            f.seq = seq;
            f
        })
}

proptest! {
    #[test]
    fn frames_roundtrip(f in frame()) {
        let words = f.encode();
        prop_assert_eq!(Frame::decode(&words), Ok(f));
        let bytes = f.encode_bytes();
        prop_assert_eq!(bytes_to_words(&bytes), words);
        prop_assert_eq!(words_to_bytes(&words), bytes);
        prop_assert_eq!(Frame::decode_bytes(&bytes), Ok(f));
    }

    #[test]
    fn any_bit_flip_is_caught(f in frame(), bit in 0usize..(FRAME_SIZE * 8)) {
        let mut bytes = f.encode_bytes();
        bytes[bit / 8] ^= 1 << (bit % 8);
        prop_assert!(Frame::decode_bytes(&bytes).is_err());
    }

    #[test]
    fn garbage_never_panics(words in proptest::array::uniform16(any::<u64>())) {
        let _ = Frame::decode(&words);
    }

    #[test]
    fn ageing_is_antisymmetric(a in any::<u32>(), d in 1u32..(1 << 31)) {
        let b = a.wrapping_add(d);
        prop_assert!(seq_older(a, b));
        prop_assert!(!seq_older(b, a));
        prop_assert_eq!(age(a, a), Age::Same);
    }
}

#[test]
fn frame_validation_errors() {
    let f = Frame::close(
        ConnId {
            slot: 1,
            generation: 2,
        },
        ConnId {
            slot: 3,
            generation: 4,
        },
        CloseReason::Abort,
    );
    let words = f.encode();
    let mut w = words;
    w[0] ^= 1;
    assert_eq!(Frame::decode(&w), Err(FrameError::BadMagic));
    let mut w = words;
    w[0] = (w[0] & !(0xff << 32)) | (1 << 32);
    assert_eq!(
        Frame::decode(&w),
        Err(FrameError::Version(1)),
        "64-byte version 1 frames are refused"
    );
    let mut w = words;
    w[4] = 1;
    assert_eq!(Frame::decode(&w), Err(FrameError::BadChecksum));
    assert_eq!(
        Frame::decode(&[0; FRAME_WORDS]),
        Err(FrameError::BadMagic),
        "zeroed memory is not a frame"
    );
    // Well-formed encoding, wrong contents for the kind: re-checksummed.
    let mut bad = Frame::new(FrameKind::Reject);
    bad.src = ConnId {
        slot: 1,
        generation: 1,
    };
    bad.dst = bad.src;
    assert_eq!(
        Frame::decode(&bad.encode()),
        Err(FrameError::Malformed),
        "a reject without a reason"
    );
    let mut bad = Frame::new(FrameKind::Accept);
    bad.src = ConnId {
        slot: 1,
        generation: 1,
    };
    assert_eq!(
        Frame::decode(&bad.encode()),
        Err(FrameError::Malformed),
        "an accept addressed to nobody"
    );
}

#[test]
fn datagram_flag_only_on_requests_and_accepts() {
    let me = ConnId {
        slot: 1,
        generation: 2,
    };
    let o = QueueOffer {
        ring_log2: 12,
        rx_area: 0,
        credit_area: 0x2000,
        start: 7,
    };
    let req = Frame::connect_request(me, (LO, 5000), (LO, 53, 0), o).for_datagrams();
    let back = Frame::decode(&req.encode()).unwrap();
    assert!(back.datagram, "the flag is carried");
    let acc = Frame::accept(&back, me, o);
    assert!(acc.datagram, "an accept echoes its request's flag");
    assert!(Frame::decode(&acc.encode()).unwrap().datagram);
    // A reject or close never carries it, whatever the struct says.
    let mut rej = Frame::reject(&back, me, RejectReason::NoListener);
    rej.datagram = true;
    assert!(!Frame::decode(&rej.encode()).unwrap().datagram);
    // Raw flag bits: unknown ones, or the flag on a close, are malformed.
    let recrc_flags = |f: Frame, flags: u64| {
        let mut w = f.encode();
        w[0] = (w[0] & 0x0000_ffff_ffff_ffff) | (flags << 48);
        let crc = crc32(&words_to_bytes(&w)[..0x7c]);
        w[FRAME_WORDS - 1] = (w[FRAME_WORDS - 1] & 0xffff_ffff) | (u64::from(crc) << 32);
        Frame::decode(&w)
    };
    assert_eq!(
        recrc_flags(req, 2),
        Err(FrameError::Malformed),
        "an unknown flag"
    );
    assert_eq!(
        recrc_flags(Frame::close(me, me, CloseReason::Graceful), 1),
        Err(FrameError::Malformed),
        "the flag on a close"
    );
    assert!(recrc_flags(req, 1).unwrap().datagram);
    assert!(!recrc_flags(req, 0).unwrap().datagram);
}

#[test]
fn addresses_carried_and_validated() {
    let me = ConnId {
        slot: 7,
        generation: 3,
    };
    let v6 = WireIp::V6([0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    let req = Frame::connect_request(me, (v6, 40000), (LO, 80, 0), QueueOffer::default());
    let acc = Frame::accept(&req, me, QueueOffer::default());
    assert_eq!(
        (acc.src_ip, acc.dst_ip),
        (LO, v6),
        "an accept swaps the addresses"
    );
    let rej = Frame::reject(&req, me, RejectReason::NoListener);
    let rej = Frame::decode(&rej.encode()).unwrap();
    assert_eq!((rej.src_ip, rej.dst_ip), (WireIp::None, WireIp::None));
    // Re-checksummed frames with bad address fields.
    let recrc = |mut f: Frame, poke: &dyn Fn(&mut [u64; FRAME_WORDS])| {
        f.seq = 1;
        let mut w = f.encode();
        poke(&mut w);
        // Recompute the CRC the way a sender would.
        let crc = crc32(&words_to_bytes(&w)[..FRAME_SIZE - 4]);
        w[FRAME_WORDS - 1] = (w[FRAME_WORDS - 1] & 0xffff_ffff) | (u64::from(crc) << 32);
        Frame::decode(&w)
    };
    assert_eq!(recrc(req, &|_| {}), Ok(Frame { seq: 1, ..req }));
    assert_eq!(
        recrc(req, &|w| w[3] = (w[3] & !(0xff << 48)) | (5 << 48)),
        Err(FrameError::Malformed),
        "unknown address family"
    );
    assert_eq!(
        recrc(
            Frame::connect_request(me, (LO, 1), (LO, 2, 0), QueueOffer::default()),
            &|w| w[7] |= 1 << 40
        ),
        Err(FrameError::Malformed),
        "an IPv4 address with non-zero padding"
    );
    assert_eq!(
        recrc(req, &|w| w[3] &= !(0xff << 56)),
        Err(FrameError::Malformed),
        "a request without the address it dialled"
    );
    assert_eq!(
        recrc(rej, &|w| w[3] |= 4 << 48),
        Err(FrameError::Malformed),
        "a reject carrying an address"
    );
    assert_eq!(
        recrc(acc, &|w| w[11] = 7),
        Err(FrameError::Malformed),
        "a namespace outside a request"
    );
    assert_eq!(
        recrc(req, &|w| w[12] = 1),
        Err(FrameError::Malformed),
        "non-zero reserved words"
    );
}

/// CRC-32 (IEEE), bit by bit, as an independent reference.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[test]
fn offers_validated_against_our_mapping() {
    let ok = QueueOffer {
        ring_log2: 12,
        rx_area: 0,
        credit_area: 4096 + 128,
        start: 5,
    };
    let v = ok.validate(8192).unwrap();
    assert_eq!(v.geometry.size(), 4096);
    assert_eq!(v.params(9).generation, 9);
    assert_eq!(v.params(9).start, 5);
    assert!(
        ok.validate(4096 + 128 + 63).is_none(),
        "credit area past the end"
    );
    let overlap = QueueOffer {
        credit_area: 64,
        ..ok
    };
    assert!(overlap.validate(1 << 20).is_none());
    let big = QueueOffer {
        ring_log2: 31,
        ..ok
    };
    assert!(big.validate(usize::MAX).is_none());
    let misaligned = QueueOffer { rx_area: 8, ..ok };
    assert!(misaligned.validate(1 << 20).is_none());
}

/// A 4-slot mailbox's two segments, initialized: the receiver's slot area and the
/// sender's ack area, both at offset 64.
fn four_slot_mailbox() -> (MailboxGeometry, TestSegment, TestSegment) {
    let geom = MailboxGeometry::from_log2(2).unwrap();
    let rx_seg = TestSegment::new(64 + geom.area_size());
    let tx_seg = TestSegment::new(128);
    mailbox::init_slots(&rx_seg, 64, geom).unwrap();
    mailbox::init_ack(&tx_seg, 64).unwrap();
    (geom, rx_seg, tx_seg)
}

/// The `i`-th frame a mailbox test sends: a close naming slot `i`.
fn nth_frame(i: u32) -> Frame {
    Frame::close(
        ConnId {
            slot: i,
            generation: 1,
        },
        ConnId {
            slot: 7,
            generation: 1,
        },
        CloseReason::Graceful,
    )
}

#[test]
fn mailbox_delivers_in_order_with_flow_control() {
    let (geom, rx_seg, tx_seg) = four_slot_mailbox();
    let mut tx = MailboxTx::new(&rx_seg, 64, &tx_seg, 64, geom).unwrap();
    let mut rx = MailboxRx::new(&rx_seg, 64, &tx_seg, 64, geom).unwrap();
    assert_eq!(rx.poll(), Ok(None), "zeroed slots are empty");
    let mut next_rx = 0u32;
    for i in 0..1000u32 {
        match tx.send(&nth_frame(i)) {
            Ok(seq) => assert_eq!(seq, i + 1),
            Err(MailboxError::Full) => {
                // Drain two, then retry.
                for _ in 0..2 {
                    let f = rx.poll().unwrap().unwrap();
                    assert_eq!(f.src.slot, next_rx);
                    next_rx += 1;
                }
                tx.send(&nth_frame(i)).unwrap();
            }
            Err(e) => panic!("{e:?}"),
        }
        assert!(tx.unacked() <= 4);
    }
    while let Some(f) = rx.poll().unwrap() {
        assert_eq!(f.src.slot, next_rx);
        next_rx += 1;
    }
    assert_eq!(next_rx, 1000);
    assert_eq!(tx.refresh(), Ok(0));
}

/// The softirq stage's lock-free look agrees with what `poll` then finds, frame after
/// frame across the slot ring's wrap; a stale `expected` says yes (a spurious thread
/// wake-up), never no while a frame waits; a sequence jump says yes (the receiver must
/// see the broken mailbox).
#[test]
fn mailbox_peek_agrees_with_poll() {
    let (geom, rx_seg, tx_seg) = four_slot_mailbox();
    let mut tx = MailboxTx::new(&rx_seg, 64, &tx_seg, 64, geom).unwrap();
    let mut rx = MailboxRx::new(&rx_seg, 64, &tx_seg, 64, geom).unwrap();
    let peek = MailboxPeek::new(&rx_seg, 64, geom).unwrap();
    assert!(!peek.frame_waiting(rx.expected()), "zeroed slots are empty");
    for i in 0..40u32 {
        let queued = (i % 3) + 1;
        for k in 0..queued {
            tx.send(&nth_frame(i * 4 + k)).unwrap();
        }
        for _ in 0..queued {
            let before = rx.expected();
            assert!(
                peek.frame_waiting(before),
                "round {i}: a frame waits at {before}"
            );
            assert!(rx.poll().unwrap().is_some(), "round {i}: poll finds it");
            assert!(
                peek.frame_waiting(before),
                "round {i}: stale expected says yes"
            );
        }
        assert!(!peek.frame_waiting(rx.expected()), "round {i}: all taken");
        assert_eq!(rx.poll(), Ok(None));
        tx.refresh().unwrap();
    }
    // A slot that holds a newer sequence than expected: a jump, which poll reports.
    let jump = rx.expected().wrapping_add(4);
    let last = 64 + (jump as usize % 4) * FRAME_SIZE + (FRAME_WORDS - 1) * 8;
    rx_seg.store_u64(last, u64::from(jump));
    assert!(peek.frame_waiting(rx.expected()));
    assert_eq!(rx.poll(), Err(MailboxError::SequenceJump));
}

#[test]
fn mailbox_hostile_ack_and_sequence() {
    let geom = MailboxGeometry::from_log2(1).unwrap();
    let slots = TestSegment::new(geom.area_size());
    let ack = TestSegment::new(64);
    mailbox::init_slots(&slots, 0, geom).unwrap();
    mailbox::init_ack(&ack, 0).unwrap();
    let mut tx = MailboxTx::new(&slots, 0, &ack, 0, geom).unwrap();
    let f = Frame::close(
        ConnId {
            slot: 1,
            generation: 1,
        },
        ConnId {
            slot: 2,
            generation: 1,
        },
        CloseReason::Abort,
    );
    tx.send(&f).unwrap();
    ack.poke(0, 1000); // acks frames never sent
    assert_eq!(tx.send(&f), Err(MailboxError::BadAck));
    let mut rx = MailboxRx::new(&slots, 0, &ack, 0, geom).unwrap();
    // Slot 1's sequence word claims seq 5 while 1 is expected (seq 1 is in slot 1).
    slots.poke(FRAME_SIZE + FRAME_SIZE - 8, 5);
    assert_eq!(rx.poll(), Err(MailboxError::SequenceJump));
    // A slot with the expected sequence but garbage is consumed and reported.
    slots.poke(FRAME_SIZE + FRAME_SIZE - 8, 1);
    assert!(matches!(rx.poll(), Err(MailboxError::Frame(_))));
    assert_eq!(rx.poll(), Ok(None));
    assert!(MailboxGeometry::from_log2(9).is_err());
    assert!(MailboxTx::new(&slots, 8, &ack, 0, geom).is_err());
    assert!(MailboxRx::new(&slots, 0, &ack, 64, geom).is_err());
}

#[test]
fn sequence_ageing_routes_stale_frames_away() {
    let me = ConnId {
        slot: 4,
        generation: 10,
    };
    let peer = ConnId {
        slot: 9,
        generation: 3,
    };
    let connecting = SlotView {
        local: me,
        peer: None,
        awaiting_answer: true,
    };
    let connected = SlotView {
        local: me,
        peer: Some(peer),
        awaiting_answer: false,
    };
    let req = Frame::connect_request(me, (LO, 1000), (LO, 80, 0), QueueOffer::default());
    assert_eq!(route(&req, None), Route::Listener);

    // The listener's answer to the current request.
    let acc = Frame::accept(&req, peer, QueueOffer::default());
    assert_eq!(route(&acc, Some(&connecting)), Route::Deliver);
    assert_eq!(
        route(&acc, Some(&connected)),
        Route::Bogus,
        "duplicate accept"
    );
    // An accept for an older use of the slot: stale, answer "abandoned".
    let old_req = Frame::connect_request(
        ConnId {
            slot: 4,
            generation: 9,
        },
        (LO, 1000),
        (LO, 80, 0),
        QueueOffer::default(),
    );
    let old_acc = Frame::accept(&old_req, peer, QueueOffer::default());
    assert_eq!(
        route(&old_acc, Some(&connecting)),
        Route::Stale {
            answer_abandoned: true
        }
    );
    assert_eq!(
        route(&old_acc, None),
        Route::Stale {
            answer_abandoned: true
        },
        "slot freed"
    );
    // A generation we never issued.
    let future = Frame::accept(
        &Frame::connect_request(
            ConnId {
                slot: 4,
                generation: 11,
            },
            (LO, 1),
            (LO, 2, 0),
            QueueOffer::default(),
        ),
        peer,
        QueueOffer::default(),
    );
    assert_eq!(route(&future, Some(&connecting)), Route::Bogus);
    let rej = Frame::reject(&old_req, peer, RejectReason::BacklogFull);
    assert_eq!(
        route(&rej, Some(&connecting)),
        Route::Stale {
            answer_abandoned: false
        }
    );

    // Closes: from the right peer, from an older peer in the same slot, from a stranger.
    let close = Frame::close(peer, me, CloseReason::Abort);
    assert_eq!(route(&close, Some(&connected)), Route::Deliver);
    assert!(mailbox::is_abort(&close));
    let old_peer = ConnId {
        slot: 9,
        generation: 2,
    };
    assert_eq!(
        route(
            &Frame::close(old_peer, me, CloseReason::Graceful),
            Some(&connected)
        ),
        Route::Stale {
            answer_abandoned: false
        }
    );
    let stranger = ConnId {
        slot: 77,
        generation: 3,
    };
    assert_eq!(
        route(
            &Frame::close(stranger, me, CloseReason::Graceful),
            Some(&connected)
        ),
        Route::Bogus
    );
    let old_me = ConnId {
        slot: 4,
        generation: 9,
    };
    assert_eq!(
        route(
            &Frame::close(peer, old_me, CloseReason::Abort),
            Some(&connected)
        ),
        Route::Stale {
            answer_abandoned: false
        },
        "a close for the previous connection in this slot"
    );

    // Generations never reuse 0 and age correctly across the wrap.
    assert_eq!(next_generation(u32::MAX), 1);
    assert!(seq_older(u32::MAX, next_generation(u32::MAX)));
}
