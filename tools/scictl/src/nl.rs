//! A client of the `af_sci` generic netlink family: resolves the family, sends requests
//! and collects replies and dumps.

use crate::attrs::{self, cmd, SciAttr};
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

/// What went wrong talking to the module.
#[derive(Debug)]
pub enum Error {
    /// The generic netlink family `af_sci` does not exist.
    NotLoaded,
    /// The kernel refused a configuration change for lack of privilege.
    NeedsAdmin,
    /// The kernel refused the request (errno, extended ack message if any).
    Kernel(i32, Option<String>),
    /// Talking to netlink failed.
    Io(io::Error),
    /// The kernel's answer made no sense.
    Decode(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NotLoaded => write!(
                f,
                "af_sci module not loaded (no generic netlink family \"{}\"; insmod af_sci.ko)",
                attrs::FAMILY_NAME
            ),
            Error::NeedsAdmin => write!(f, "needs CAP_NET_ADMIN (operation not permitted)"),
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

/// A message of the `af_sci` family: a command and its attributes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SciGenl {
    pub cmd: u8,
    pub attrs: Vec<SciAttr>,
}

impl GenlFamily for SciGenl {
    fn family_name() -> &'static str {
        attrs::FAMILY_NAME
    }
    fn command(&self) -> u8 {
        self.cmd
    }
    fn version(&self) -> u8 {
        attrs::FAMILY_VERSION
    }
}

impl Emitable for SciGenl {
    fn buffer_len(&self) -> usize {
        self.attrs.as_slice().buffer_len()
    }
    fn emit(&self, buffer: &mut [u8]) {
        self.attrs.as_slice().emit(buffer)
    }
}

impl ParseableParametrized<[u8], GenlHeader> for SciGenl {
    fn parse_with_param(buf: &[u8], header: GenlHeader) -> Result<Self, DecodeError> {
        Ok(SciGenl {
            cmd: header.cmd,
            attrs: attrs::parse_nlas(buf)?,
        })
    }
}

/// `NLMSGERR_ATTR_MSG`: the extended ack's message.
const NLMSGERR_ATTR_MSG: u16 = 1;
/// Size of a `struct nlmsghdr`.
const NLMSG_HDRLEN: usize = 16;

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

/// Splits a datagram into its netlink messages.
fn split_messages(buf: &[u8]) -> Result<Vec<&[u8]>, Error> {
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

/// A connection to the `af_sci` family.
pub struct Client {
    sock: Socket,
    family: u16,
    seq: u32,
}

impl Client {
    /// Connects and resolves the family (`Error::NotLoaded` without the module).
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
            nlas: vec![GenlCtrlAttrs::FamilyName(attrs::FAMILY_NAME.to_owned())],
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
                Err(Error::NotLoaded)
            }
            NetlinkPayload::Error(e) => Err(Error::Io(e.to_io())),
            other => Err(Error::Decode(format!(
                "unexpected reply to CTRL_CMD_GETFAMILY: {other:?}"
            ))),
        }
    }

    fn request(
        &self,
        cmd: u8,
        attrs: Vec<SciAttr>,
        flags: u16,
    ) -> NetlinkMessage<GenlMessage<SciGenl>> {
        let mut genl = GenlMessage::from_payload(SciGenl { cmd, attrs });
        genl.set_resolved_family_id(self.family);
        genl.finalize();
        let mut msg = NetlinkMessage::from(genl);
        msg.header.flags = flags;
        msg
    }

    /// Collects the replies to request `seq` until its ack (`NLMSG_ERROR` 0), its end
    /// (`NLMSG_DONE`) or an error.
    fn collect(&mut self, seq: u32, dump: bool) -> Result<Vec<SciGenl>, Error> {
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
                        let errno = -code;
                        if errno == libc::EPERM {
                            return Err(Error::NeedsAdmin);
                        }
                        let msg = if kind == NLMSG_ERROR {
                            ext_ack_message(&payload[4..])
                        } else {
                            None
                        };
                        return Err(Error::Kernel(errno, msg));
                    }
                    _ => {
                        let msg = NetlinkMessage::<GenlMessage<SciGenl>>::deserialize(raw)?;
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

    /// Runs command `cmd` as a dump; returns every reply's attributes.
    pub fn dump(&mut self, cmd: u8) -> Result<Vec<Vec<SciAttr>>, Error> {
        let seq = self.send(self.request(cmd, Vec::new(), NLM_F_REQUEST | NLM_F_DUMP))?;
        Ok(self
            .collect(seq, true)?
            .into_iter()
            .map(|m| m.attrs)
            .collect())
    }

    /// Runs command `cmd` with `attrs`, expecting an ack.
    pub fn set(&mut self, cmd: u8, attrs: Vec<SciAttr>) -> Result<(), Error> {
        let seq = self.send(self.request(cmd, attrs, NLM_F_REQUEST | NLM_F_ACK))?;
        self.collect(seq, false).map(|_| ())
    }

    /// Runs command `cmd` (a `do` with a reply); returns the reply's attributes.
    pub fn get(&mut self, cmd: u8) -> Result<Vec<SciAttr>, Error> {
        let seq = self.send(self.request(cmd, Vec::new(), NLM_F_REQUEST))?;
        self.collect(seq, false)?
            .into_iter()
            .next()
            .map(|m| m.attrs)
            .ok_or_else(|| Error::Decode(format!("no reply to command {cmd}")))
    }
}

/// The commands, for callers.
pub use cmd::{LINK_DROP, NODE_GET, NODE_SET, PORT_GET, PORT_SET, SOCK_GET, STATS_GET};
