//! The resume exchange of a failover (`rust/proto/resume.rs`): whatever mix of published,
//! staged and read bytes a queue holds when its fabric path is lost, the reader gets every
//! byte once, in order, from its ring up to the writer's header and then from the TCP
//! stream; headers that lie are refused.

use proptest::prelude::*;

use super::{stream, QueuePair};
use crate::proto::frame::ConnId;
use crate::proto::resume::{ResumeError, ResumeHeader, RESUME_LEN};

const WRITER: ConnId = ConnId {
    slot: 7,
    generation: 3,
};
const READER: ConnId = ConnId {
    slot: 9,
    generation: 5,
};

/// Writes `len` bytes of the test stream at `pos`; publishes them or only stages them.
fn write(q: &mut QueuePair, seed: u64, pos: &mut u64, len: usize, publish: bool) {
    let spans = q.producer.writable().unwrap().truncate(len);
    let n = spans.total();
    q.rx_seg.copy_into_spans(spans, &stream(seed, *pos, n));
    if publish {
        q.producer.commit(n).unwrap();
    } else {
        q.producer.stage(n).unwrap();
    }
    *pos += n as u64;
}

/// Reads up to `len` bytes from the ring.
fn read(q: &mut QueuePair, len: usize) -> Vec<u8> {
    let spans = q.consumer.readable().unwrap().truncate(len);
    let n = spans.total();
    let got = q.rx_seg.copy_from_spans(spans, n);
    q.consumer.consume_and_update(n).unwrap();
    got
}

/// The reader's check of `h`.
fn check(q: &QueuePair, h: &ResumeHeader) -> Result<u64, ResumeError> {
    h.check(READER, WRITER, q.consumer.resume_view())
}

proptest! {
    /// Published, staged and already read bytes in any mix: the ring up to the header,
    /// then the TCP tail, is the stream, once and in order.
    #[test]
    fn nothing_lost_nothing_twice(
        seed in any::<u64>(),
        start in prop_oneof![Just(0u64), Just(u64::MAX - 100), any::<u64>()],
        steps in proptest::collection::vec((0usize..3000, any::<bool>(), 0usize..3000), 1..12),
        tail in 0usize..5000,
    ) {
        let mut q = QueuePair::new(12, 1, start, 1);
        let (mut written, mut got) = (0u64, Vec::new());
        for (w, publish, r) in steps {
            write(&mut q, seed, &mut written, w, publish);
            got.extend(read(&mut q, r));
        }
        // The writer stops and says how far it wrote; the header crosses TCP as bytes.
        let header = ResumeHeader { from: WRITER, to: READER, written: q.producer.written() };
        prop_assert_eq!(header.written, written);
        let wire = header.encode();
        let header = ResumeHeader::decode(&wire).unwrap();
        let end = check(&q, &header).unwrap();
        q.consumer.freeze(end).unwrap();
        // Whatever the old writer stores now is not looked at.
        let spans = q.producer.writable().unwrap();
        let n = spans.total();
        if n > 0 {
            q.rx_seg.copy_into_spans(spans, &vec![0xee; n]);
            q.producer.commit(n).unwrap();
        }
        loop {
            let chunk = read(&mut q, 1000);
            if chunk.is_empty() {
                break;
            }
            got.extend(chunk);
        }
        prop_assert_eq!(q.consumer.available(), 0);
        got.extend(stream(seed, written, tail));
        prop_assert_eq!(got, stream(seed, 0, written as usize + tail));
    }

    /// A header that names other ends, claims fewer bytes than the reader saw published,
    /// or more than the ring holds beyond what it read, is refused; so is any byte string
    /// that is not a header.
    #[test]
    fn lies_are_refused(
        seed in any::<u64>(),
        w in 1usize..4096,
        r in 0usize..4096,
        behind in 1u64..5000,
        ahead in 1u64..5000,
        junk in proptest::collection::vec(any::<u8>(), RESUME_LEN),
    ) {
        let mut q = QueuePair::new(12, 1, seed, 1);
        let mut written = 0;
        write(&mut q, seed, &mut written, w, true);
        let _ = read(&mut q, r);
        q.consumer.refresh().unwrap();
        let honest = ResumeHeader { from: WRITER, to: READER, written };
        prop_assert!(check(&q, &honest).is_ok());
        let other = ResumeHeader { from: READER, ..honest };
        prop_assert_eq!(check(&q, &other), Err(ResumeError::OtherConnection));
        let stale = ResumeHeader { to: ConnId { generation: 6, ..READER }, ..honest };
        prop_assert_eq!(check(&q, &stale), Err(ResumeError::OtherConnection));
        let short = ResumeHeader { written: written.wrapping_sub(behind.min(written).max(1)), ..honest };
        prop_assert_eq!(check(&q, &short), Err(ResumeError::Impossible));
        let (_, consumed, _, size) = q.consumer.resume_view();
        let read_so_far = consumed.wrapping_sub(seed);
        let long = ResumeHeader { written: read_so_far + size + ahead, ..honest };
        prop_assert_eq!(check(&q, &long), Err(ResumeError::Impossible));
        let mut bytes = [0u8; RESUME_LEN];
        bytes.copy_from_slice(&junk);
        if bytes[..4] != *b"SCIR" {
            prop_assert_eq!(ResumeHeader::decode(&bytes), Err(ResumeError::Format));
        }
    }
}

/// The wire format is the one documented in `resume.rs`.
#[test]
fn wire_format() {
    let h = ResumeHeader {
        from: WRITER,
        to: READER,
        written: 0x0102_0304_0506_0708,
    };
    let b = h.encode();
    assert_eq!(&b[0..4], b"SCIR");
    assert_eq!(&b[4..8], &[1, 0, 0, 0]);
    assert_eq!(&b[8..16], &[7, 0, 0, 0, 3, 0, 0, 0]);
    assert_eq!(&b[16..24], &[9, 0, 0, 0, 5, 0, 0, 0]);
    assert_eq!(&b[24..32], &[8, 7, 6, 5, 4, 3, 2, 1]);
    let mut flagged = b;
    flagged[6] = 1;
    assert_eq!(ResumeHeader::decode(&flagged), Err(ResumeError::Format));
}
