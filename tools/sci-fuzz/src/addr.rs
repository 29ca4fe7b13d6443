//! Socket addresses as the kernel reads them (bytes), and the peers' addresses.

pub const LO4: [u8; 4] = [127, 0, 0, 1];
pub const LO6: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
pub const ANY6: [u8; 16] = [0; 16];

/// `struct sockaddr_in` (16 bytes).
pub fn sin(ip: [u8; 4], port: u16) -> Vec<u8> {
    let mut b = vec![0u8; 16];
    b[0..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
    b[2..4].copy_from_slice(&port.to_be_bytes());
    b[4..8].copy_from_slice(&ip);
    b
}

/// `struct sockaddr_in6` (28 bytes).
pub fn sin6(ip: [u8; 16], port: u16, scope: u32) -> Vec<u8> {
    let mut b = vec![0u8; 28];
    b[0..2].copy_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
    b[2..4].copy_from_slice(&port.to_be_bytes());
    b[8..24].copy_from_slice(&ip);
    b[24..28].copy_from_slice(&scope.to_ne_bytes());
    b
}

/// `::ffff:a.b.c.d`.
pub fn mapped(ip: [u8; 4]) -> [u8; 16] {
    let mut a = [0u8; 16];
    a[10] = 0xff;
    a[11] = 0xff;
    a[12..16].copy_from_slice(&ip);
    a
}

/// What listens at a peer address, and so what a connection to it becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerKind {
    /// An AF_SCI listener: AF_SCI clients connect over SCI.
    Sci,
    /// A plain TCP listener: AF_SCI clients fall back to TCP.
    Tcp,
    /// An AF_SCI listener that the fuzzer's plain TCP clients connect to (peer-tcp).
    SciForTcp,
    /// An AF_SCI datagram socket: AF_SCI datagram sockets reach it over implicit SCI
    /// connections (after their first datagram, which goes over UDP).
    SciDgram,
}

/// One of the parent's listeners.
#[derive(Clone, Copy, Debug)]
pub struct Peer {
    pub name: &'static str,
    pub kind: PeerKind,
    /// Its address as bound (IPv4 or IPv6; a wildcard takes 127.0.0.1 and ::1).
    pub v6: bool,
    pub wildcard: bool,
    pub port: u16,
}

impl Peer {
    /// An address that reaches this listener: `choice` picks among the ones that do.
    pub fn address(&self, choice: u64) -> Vec<u8> {
        match (self.v6, self.wildcard, choice % 3) {
            (false, false, 0 | 1) => sin(LO4, self.port),
            (false, false, _) => sin6(mapped(LO4), self.port, 0),
            (true, false, _) => sin6(LO6, self.port, 0),
            (true, true, 0) => sin(LO4, self.port),
            (true, true, 1) => sin6(LO6, self.port, 0),
            (true, true, _) => sin6(mapped(LO4), self.port, 0),
            (false, true, _) => sin([127, 0, 0, 1 + (choice % 7) as u8], self.port),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts() {
        let a = sin(LO4, 0x1234);
        assert_eq!(a.len(), 16);
        assert_eq!(u16::from_ne_bytes([a[0], a[1]]), libc::AF_INET as u16);
        assert_eq!(&a[2..4], &[0x12, 0x34]);
        assert_eq!(&a[4..8], &LO4);
        let b = sin6(LO6, 80, 0);
        assert_eq!(b.len(), std::mem::size_of::<libc::sockaddr_in6>());
        assert_eq!(b[23], 1);
        assert_eq!(mapped(LO4)[10..], [0xff, 0xff, 127, 0, 0, 1]);
    }
}
