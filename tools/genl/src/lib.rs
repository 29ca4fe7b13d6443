//! A generic netlink client for one family: resolves the family by name, sends a request
//! and collects its replies until the kernel's ack or the end of the dump.
//!
//! scictl talks to `af_sci` with it and sci-bench to `SMC_GEN_NETLINK`: the plumbing on
//! top of the `netlink-packet-*` crates that both would otherwise carry.

use netlink_packet_core::{
    DecodeError, Emitable, NetlinkBuffer, NetlinkMessage, NetlinkPayload, NlasIterator,
    ParseableParametrized, NLMSG_DONE, NLMSG_ERROR, NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_generic::ctrl::nlas::GenlCtrlAttrs;
use netlink_packet_generic::ctrl::{GenlCtrl, GenlCtrlCmd};
use netlink_packet_generic::{GenlFamily, GenlHeader, GenlMessage};
use netlink_sys::protocols::NETLINK_GENERIC;
use netlink_sys::{Socket, SocketAddr};
use std::fmt;
use std::io;
use std::marker::PhantomData;

/// What went wrong.
#[derive(Debug)]
pub enum Error {
    /// The kernel has no generic netlink family of that name (its module is not loaded).
    NoFamily(&'static str),
    /// The kernel refused the request (a positive errno, and the extended ack's message).
    Kernel(i32, Option<String>),
    /// Talking to netlink failed.
    Io(io::Error),
    /// The kernel's answer made no sense.
    Decode(String),
}

impl Error {
    /// The errno the kernel answered with, if it answered with one.
    pub fn errno(&self) -> Option<i32> {
        match self {
            Error::Kernel(e, _) => Some(*e),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NoFamily(name) => write!(f, "no generic netlink family \"{name}\""),
            Error::Kernel(errno, msg) => {
                write!(f, "{}", io::Error::from_raw_os_error(*errno))?;
                if let Some(msg) = msg {
                    write!(f, ": {msg}")?;
                }
                Ok(())
            }
            Error::Io(e) => write!(f, "netlink: {e}"),
            Error::Decode(e) => write!(f, "unexpected reply from the kernel: {e}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error::Io(e)
    }
}

impl From<DecodeError> for Error {
    fn from(e: DecodeError) -> Self {
        Error::Decode(e.to_string())
    }
}

impl From<Error> for io::Error {
    fn from(e: Error) -> Self {
        match e {
            Error::Io(e) => e,
            Error::NoFamily(_) => io::Error::new(io::ErrorKind::NotFound, e.to_string()),
            Error::Kernel(errno, _) => {
                io::Error::new(io::Error::from_raw_os_error(errno).kind(), e.to_string())
            }
            Error::Decode(_) => io::Error::new(io::ErrorKind::InvalidData, e.to_string()),
        }
    }
}

/// `NLMSGERR_ATTR_MSG`: the extended ack's message.
const NLMSGERR_ATTR_MSG: u16 = 1;
/// Size of a `struct nlmsghdr`.
pub const NLMSG_HDRLEN: usize = 16;

/// The extended ack message in the rest of an `NLMSG_ERROR` (the request's header, then
/// attributes, with `NETLINK_CAP_ACK` and `NETLINK_EXT_ACK` on).
pub fn ext_ack_message(rest: &[u8]) -> Option<String> {
    let tlvs = rest.get(NLMSG_HDRLEN..)?;
    NlasIterator::new(tlvs).flatten().find_map(|nla| {
        (nla.kind() == NLMSGERR_ATTR_MSG).then(|| {
            let v = nla.value();
            let end = v.iter().position(|&b| b == 0).unwrap_or(v.len());
            String::from_utf8_lossy(&v[..end]).into_owned()
        })
    })
}

/// Splits a datagram into its netlink messages (header and payload each).
pub fn split_messages(buf: &[u8]) -> Result<Vec<&[u8]>, Error> {
    let mut out = Vec::new();
    let mut off = 0;
    while off < buf.len() {
        let nl = NetlinkBuffer::new_checked(&buf[off..])?;
        let len = nl.length() as usize;
        if len < NLMSG_HDRLEN {
            return Err(Error::Decode(format!("netlink message of {len} bytes")));
        }
        out.push(&buf[off..off + len]);
        off += (len + 3) & !3;
    }
    Ok(out)
}

/// A connection to the generic netlink family `F`.
pub struct Client<F> {
    sock: Socket,
    family: u16,
    seq: u32,
    _family: PhantomData<F>,
}

impl<F> Client<F>
where
    F: GenlFamily + Emitable + ParseableParametrized<[u8], GenlHeader> + fmt::Debug,
{
    /// Connects and resolves the family ([`Error::NoFamily`] when the kernel has none).
    pub fn connect() -> Result<Self, Error> {
        let mut sock = Socket::new(NETLINK_GENERIC)?;
        sock.bind_auto()?;
        sock.connect(&SocketAddr::new(0, 0))?;
        // Best effort: older kernels lack them, and errors are still reported without.
        let _ = sock.set_ext_ack(true);
        let _ = sock.set_cap_ack(true);
        let mut client = Client {
            sock,
            family: 0,
            seq: 0,
            _family: PhantomData,
        };
        client.family = client.resolve()?;
        Ok(client)
    }

    fn send<I: netlink_packet_core::NetlinkSerializable>(
        &mut self,
        mut msg: NetlinkMessage<I>,
    ) -> Result<u32, Error> {
        self.seq = self.seq.wrapping_add(1);
        msg.header.sequence_number = self.seq;
        msg.finalize();
        let mut buf = vec![0u8; msg.buffer_len()];
        msg.serialize(&mut buf);
        self.sock.send(&buf, 0)?;
        Ok(self.seq)
    }

    fn resolve(&mut self) -> Result<u16, Error> {
        let mut genl = GenlMessage::from_payload(GenlCtrl {
            cmd: GenlCtrlCmd::GetFamily,
            nlas: vec![GenlCtrlAttrs::FamilyName(F::family_name().to_owned())],
        });
        genl.finalize();
        let mut msg = NetlinkMessage::from(genl);
        msg.header.flags = NLM_F_REQUEST;
        self.send(msg)?;
        let (buf, _) = self.sock.recv_from_full()?;
        let reply = NetlinkMessage::<GenlMessage<GenlCtrl>>::deserialize(&buf)?;
        match reply.payload {
            NetlinkPayload::InnerMessage(genl) => genl
                .payload
                .nlas
                .iter()
                .find_map(|nla| match nla {
                    GenlCtrlAttrs::FamilyId(id) => Some(*id),
                    _ => None,
                })
                .ok_or_else(|| Error::Decode("the netlink controller sent no family id".into())),
            NetlinkPayload::Error(e) if e.code.map(|c| -c.get()) == Some(libc::ENOENT) => {
                Err(Error::NoFamily(F::family_name()))
            }
            NetlinkPayload::Error(e) => Err(Error::Io(e.to_io())),
            other => Err(Error::Decode(format!(
                "unexpected reply to CTRL_CMD_GETFAMILY: {other:?}"
            ))),
        }
    }

    fn request(&mut self, payload: F, flags: u16) -> Result<u32, Error> {
        let mut genl = GenlMessage::from_payload(payload);
        genl.set_resolved_family_id(self.family);
        genl.finalize();
        let mut msg = NetlinkMessage::from(genl);
        msg.header.flags = flags;
        self.send(msg)
    }

    /// Collects the replies to request `seq` until its ack (`NLMSG_ERROR` 0), its end
    /// (`NLMSG_DONE`) or an error; a request that is not a dump ends with its first reply.
    fn collect(&mut self, seq: u32, dump: bool) -> Result<Vec<F>, Error> {
        let mut out = Vec::new();
        loop {
            let (buf, _) = self.sock.recv_from_full()?;
            for raw in split_messages(&buf)? {
                let header = NetlinkBuffer::new_checked(raw)?;
                if header.sequence_number() != seq {
                    continue;
                }
                match header.message_type() {
                    // Both carry an error code (0: success; a dump's end may carry none).
                    kind @ (NLMSG_DONE | NLMSG_ERROR) => {
                        let payload = header.payload();
                        let code = match payload.get(..4) {
                            Some(b) => i32::from_ne_bytes([b[0], b[1], b[2], b[3]]),
                            None if kind == NLMSG_DONE => 0,
                            None => return Err(Error::Decode("short NLMSG_ERROR".into())),
                        };
                        if code == 0 {
                            return Ok(out);
                        }
                        let msg = if kind == NLMSG_ERROR {
                            ext_ack_message(&payload[4..])
                        } else {
                            None
                        };
                        return Err(Error::Kernel(-code, msg));
                    }
                    _ => {
                        let msg = NetlinkMessage::<GenlMessage<F>>::deserialize(raw)?;
                        if let NetlinkPayload::InnerMessage(genl) = msg.payload {
                            out.push(genl.payload);
                        }
                        if !dump {
                            return Ok(out);
                        }
                    }
                }
            }
        }
    }

    /// Sends `request` as a dump; returns every reply.
    pub fn dump(&mut self, request: F) -> Result<Vec<F>, Error> {
        let seq = self.request(request, NLM_F_REQUEST | NLM_F_DUMP)?;
        self.collect(seq, true)
    }

    /// Sends `request` and waits for its ack.
    pub fn ack(&mut self, request: F) -> Result<(), Error> {
        let seq = self.request(request, NLM_F_REQUEST | NLM_F_ACK)?;
        self.collect(seq, false).map(|_| ())
    }

    /// Sends `request` (a `do` that answers); returns the answer.
    pub fn get(&mut self, request: F) -> Result<F, Error> {
        let seq = self.request(request, NLM_F_REQUEST)?;
        self.collect(seq, false)?
            .into_iter()
            .next()
            .ok_or_else(|| Error::Decode("no reply".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A netlink message of `kind` around `payload`, padded to 4 bytes.
    fn nlmsg(kind: u16, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&((NLMSG_HDRLEN + payload.len()) as u32).to_ne_bytes());
        v.extend_from_slice(&kind.to_ne_bytes());
        v.extend_from_slice(&[0; 10]);
        v.extend_from_slice(payload);
        while v.len() % 4 != 0 {
            v.push(0);
        }
        v
    }

    #[test]
    fn a_datagram_splits_into_its_messages() {
        let mut buf = nlmsg(0x20, &[1, 2, 3]);
        buf.extend(nlmsg(NLMSG_DONE, &0i32.to_ne_bytes()));
        let parts = split_messages(&buf).unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].len(), NLMSG_HDRLEN + 3);
        assert_eq!(&parts[0][NLMSG_HDRLEN..], &[1, 2, 3]);
        // A length shorter than a header is refused, not looped on.
        let mut bad = nlmsg(0x20, &[]);
        bad[..4].copy_from_slice(&4u32.to_ne_bytes());
        assert!(split_messages(&bad).is_err());
    }

    #[test]
    fn the_extended_ack_message_is_found() {
        // The request's header, then NLMSGERR_ATTR_MSG "bad port\0".
        let mut rest = vec![0u8; NLMSG_HDRLEN];
        let text = b"bad port\0";
        rest.extend_from_slice(&((4 + text.len()) as u16).to_ne_bytes());
        rest.extend_from_slice(&NLMSGERR_ATTR_MSG.to_ne_bytes());
        rest.extend_from_slice(text);
        while rest.len() % 4 != 0 {
            rest.push(0);
        }
        assert_eq!(ext_ack_message(&rest).as_deref(), Some("bad port"));
        assert_eq!(ext_ack_message(&rest[..NLMSG_HDRLEN]), None);
    }

    #[test]
    fn errors_read_clearly_and_keep_their_errno() {
        let e = Error::Kernel(libc::EINVAL, Some("address listed twice".into()));
        assert_eq!(e.errno(), Some(libc::EINVAL));
        assert_eq!(
            e.to_string(),
            "Invalid argument (os error 22): address listed twice"
        );
        assert_eq!(
            io::Error::from(Error::NoFamily("x")).kind(),
            io::ErrorKind::NotFound
        );
        assert_eq!(
            io::Error::from(Error::Kernel(libc::EPERM, None)).kind(),
            io::ErrorKind::PermissionDenied
        );
    }
}
