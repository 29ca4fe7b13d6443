//! AF_SMC: the user EID that lets SMC-D use its loopback device, and the `smc_diag` query
//! that tells whether a connection really runs over SMC-D.
//!
//! On x86 an `AF_SMC` connection uses the `loopback-ism` device (CONFIG_SMC_LO) only when
//! both ends share a user EID (UEID); without one every connection silently falls back to
//! TCP with reason `SMC_CLC_DECL_NOUEID`. smc-tools' `smcd ueid add` adds one through the
//! `SMC_GEN_NETLINK` generic netlink family; [`add_ueid`] does the same.

use netlink_packet_core::{
    DecodeError, DefaultNla, Emitable, NetlinkBuffer, NetlinkDeserializable, NetlinkHeader,
    NetlinkMessage, NetlinkPayload, NetlinkSerializable, Nla, NlasIterator, Parseable,
    ParseableParametrized, NLMSG_DONE, NLMSG_ERROR, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_generic::{GenlFamily, GenlHeader};
use netlink_sys::protocols::NETLINK_SOCK_DIAG;
use netlink_sys::{Socket, SocketAddr};
use std::io;

/// `SMC_GENL_FAMILY_NAME` / `_VERSION` (include/uapi/linux/smc.h).
pub const SMC_GENL_FAMILY_NAME: &str = "SMC_GEN_NETLINK";
pub const SMC_GENL_FAMILY_VERSION: u8 = 1;
pub const SMC_NETLINK_DUMP_UEID: u8 = 9;
pub const SMC_NETLINK_ADD_UEID: u8 = 10;
pub const SMC_NLA_EID_TABLE_ENTRY: u16 = 1;
/// `SMC_MAX_EID_LEN`: an EID is 32 bytes, upper case, padded with blanks.
pub const SMC_MAX_EID_LEN: usize = 32;
/// The UEID sci-bench adds when asked to.
pub const DEFAULT_UEID: &str = "SCI-BENCH";

/// `SOCK_DIAG_BY_FAMILY` (include/uapi/linux/sock_diag.h).
const SOCK_DIAG_BY_FAMILY: u16 = 20;
/// `SMC_DIAG_MODE_*` (include/uapi/linux/smc_diag.h).
pub const SMC_DIAG_MODE_SMCR: u8 = 0;
pub const SMC_DIAG_MODE_FALLBACK_TCP: u8 = 1;
pub const SMC_DIAG_MODE_SMCD: u8 = 2;
/// `SMC_DIAG_FALLBACK` attribute: `struct smc_diag_fallback { u32 reason, peer_diagnosis }`.
const SMC_DIAG_FALLBACK: u16 = 5;
/// Size of `struct smc_diag_req` and `struct smc_diag_msg`.
const SMC_DIAG_REQ_LEN: usize = 52;
const SMC_DIAG_MSG_LEN: usize = 64;
/// `SMC_CLC_DECL_NOUEID` (net/smc/smc_clc.h): the reason a connection falls back without a UEID.
pub const SMC_CLC_DECL_NOUEID: u32 = 0x0303_0008;

fn other(msg: impl Into<String>) -> io::Error {
    io::Error::other(msg.into())
}

fn decode_err(e: DecodeError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

/// Encodes a user EID as the kernel wants it in `SMC_NLA_EID_TABLE_ENTRY`: 32 bytes, upper
/// case, blank-padded, plus the terminating NUL (the attribute must be 33 bytes long).
/// Valid EIDs start with a letter or digit and hold only letters, digits, '.' and '-'
/// (`smc_clc_ueid_valid`).
pub fn encode_eid(name: &str) -> Result<[u8; SMC_MAX_EID_LEN + 1], String> {
    let upper = name.trim().to_ascii_uppercase();
    if upper.is_empty() {
        return Err("an EID cannot be empty".into());
    }
    if upper.len() > SMC_MAX_EID_LEN {
        return Err(format!(
            "EID '{name}' is longer than {SMC_MAX_EID_LEN} characters"
        ));
    }
    let bytes = upper.as_bytes();
    if !bytes[0].is_ascii_alphanumeric() {
        return Err(format!("EID '{name}' must start with a letter or a digit"));
    }
    if let Some(c) = bytes
        .iter()
        .find(|c| !(c.is_ascii_alphanumeric() || **c == b'.' || **c == b'-'))
    {
        return Err(format!(
            "EID '{name}' contains '{}': only letters, digits, '.' and '-' are allowed",
            *c as char
        ));
    }
    let mut out = [b' '; SMC_MAX_EID_LEN + 1];
    out[..bytes.len()].copy_from_slice(bytes);
    out[SMC_MAX_EID_LEN] = 0;
    Ok(out)
}

/// The text of an EID attribute as the kernel returns it (NUL-terminated, blank-padded).
pub fn decode_eid(raw: &[u8]) -> String {
    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    String::from_utf8_lossy(&raw[..end]).trim_end().to_string()
}

/// A message of the `SMC_GEN_NETLINK` family: a command and its attributes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmcGenl {
    pub cmd: u8,
    pub attrs: Vec<DefaultNla>,
}

impl GenlFamily for SmcGenl {
    fn family_name() -> &'static str {
        SMC_GENL_FAMILY_NAME
    }
    fn command(&self) -> u8 {
        self.cmd
    }
    fn version(&self) -> u8 {
        SMC_GENL_FAMILY_VERSION
    }
}

impl Emitable for SmcGenl {
    fn buffer_len(&self) -> usize {
        self.attrs.as_slice().buffer_len()
    }
    fn emit(&self, buffer: &mut [u8]) {
        self.attrs.as_slice().emit(buffer)
    }
}

impl ParseableParametrized<[u8], GenlHeader> for SmcGenl {
    fn parse_with_param(buf: &[u8], header: GenlHeader) -> Result<Self, DecodeError> {
        let attrs = NlasIterator::new(buf)
            .map(|nla| nla.and_then(|nla| DefaultNla::parse(&nla)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(SmcGenl {
            cmd: header.cmd,
            attrs,
        })
    }
}

/// Splits a datagram into its netlink messages (header and payload each).
fn split_messages(buf: &[u8]) -> io::Result<Vec<&[u8]>> {
    Ok(sci_genl::split_messages(buf)?)
}

/// A connection to `SMC_GEN_NETLINK`; `NotFound` when the kernel has no SMC.
fn smc_client() -> io::Result<sci_genl::Client<SmcGenl>> {
    sci_genl::Client::connect().map_err(|e| match e {
        sci_genl::Error::NoFamily(_) => io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "generic netlink family {SMC_GENL_FAMILY_NAME} not found: no SMC in this kernel?"
            ),
        ),
        e => e.into(),
    })
}

/// What [`add_ueid`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum UeidOutcome {
    Added,
    AlreadySet,
}

/// Adds `name` to the kernel's user EID table (`SMC_NETLINK_ADD_UEID`, needs
/// CAP_NET_ADMIN). An EID that is already there is not an error.
pub fn add_ueid(name: &str) -> io::Result<UeidOutcome> {
    let eid = encode_eid(name).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let nla = DefaultNla::new(SMC_NLA_EID_TABLE_ENTRY, eid.to_vec());
    let request = SmcGenl {
        cmd: SMC_NETLINK_ADD_UEID,
        attrs: vec![nla],
    };
    match smc_client()?.ack(request) {
        Ok(()) => Ok(UeidOutcome::Added),
        Err(e) if e.errno() == Some(libc::EEXIST) => Ok(UeidOutcome::AlreadySet),
        Err(e) => {
            let e = io::Error::from(e);
            Err(io::Error::new(
                e.kind(),
                format!("SMC_NETLINK_ADD_UEID {name}: {e}"),
            ))
        }
    }
}

/// The kernel's user EID table (`SMC_NETLINK_DUMP_UEID`).
pub fn list_ueids() -> io::Result<Vec<String>> {
    let request = SmcGenl {
        cmd: SMC_NETLINK_DUMP_UEID,
        attrs: vec![],
    };
    let mut out = Vec::new();
    for reply in smc_client()?.dump(request)? {
        for nla in &reply.attrs {
            if nla.kind() == SMC_NLA_EID_TABLE_ENTRY {
                let mut raw = vec![0u8; nla.value_len()];
                nla.emit_value(&mut raw);
                out.push(decode_eid(&raw));
            }
        }
    }
    Ok(out)
}

/// One `AF_SMC` socket as `smc_diag` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiagEntry {
    pub state: u8,
    pub mode: u8,
    /// Ports of the socket's TCP (CLC) socket, host order.
    pub sport: u16,
    pub dport: u16,
    pub inode: u64,
    /// `SMC_DIAG_FALLBACK`'s reason (0 when not fallen back).
    pub fallback_reason: u32,
}

/// `struct smc_diag_req` for a dump of every `AF_SMC` socket.
#[derive(Clone, Debug)]
struct SmcDiagReq;

impl NetlinkSerializable for SmcDiagReq {
    fn message_type(&self) -> u16 {
        SOCK_DIAG_BY_FAMILY
    }
    fn buffer_len(&self) -> usize {
        SMC_DIAG_REQ_LEN
    }
    fn serialize(&self, buffer: &mut [u8]) {
        buffer.fill(0);
        buffer[0] = crate::sys::AF_SMC as u8; // diag_family; diag_ext 0, id all zero
    }
}

impl NetlinkDeserializable for SmcDiagReq {
    type Error = DecodeError;
    fn deserialize(_: &NetlinkHeader, _: &[u8]) -> Result<Self, Self::Error> {
        Ok(SmcDiagReq)
    }
}

/// Parses one `smc_diag` reply datagram. Returns the entries and whether the dump is done.
pub fn parse_diag(buf: &[u8]) -> io::Result<(Vec<DiagEntry>, bool)> {
    let mut out = Vec::new();
    for m in split_messages(buf)? {
        let nl = NetlinkBuffer::new_checked(m).map_err(decode_err)?;
        match nl.message_type() {
            NLMSG_DONE => return Ok((out, true)),
            NLMSG_ERROR => {
                let p = nl.payload();
                let code = if p.len() >= 4 {
                    i32::from_ne_bytes([p[0], p[1], p[2], p[3]])
                } else {
                    0
                };
                if code == 0 {
                    return Ok((out, true));
                }
                return Err(io::Error::from_raw_os_error(-code));
            }
            _ => {}
        }
        let p = nl.payload();
        if p.len() < SMC_DIAG_MSG_LEN {
            return Err(other(format!("short smc_diag_msg ({} bytes)", p.len())));
        }
        let mut fallback_reason = 0;
        for nla in NlasIterator::new(&p[SMC_DIAG_MSG_LEN..]) {
            let nla = nla.map_err(decode_err)?;
            if nla.kind() == SMC_DIAG_FALLBACK && nla.value().len() >= 4 {
                let v = nla.value();
                fallback_reason = u32::from_ne_bytes([v[0], v[1], v[2], v[3]]);
            }
        }
        let mut inode = [0u8; 8];
        inode.copy_from_slice(&p[56..64]);
        out.push(DiagEntry {
            state: p[1],
            mode: p[2],
            sport: u16::from_be_bytes([p[4], p[5]]),
            dport: u16::from_be_bytes([p[6], p[7]]),
            inode: u64::from_ne_bytes(inode),
            fallback_reason,
        });
    }
    Ok((out, false))
}

/// Every `AF_SMC` socket of this network namespace, through `NETLINK_SOCK_DIAG`.
pub fn diag_dump() -> io::Result<Vec<DiagEntry>> {
    let sock = Socket::new(NETLINK_SOCK_DIAG)?;
    let mut msg = NetlinkMessage::new(
        NetlinkHeader::default(),
        NetlinkPayload::InnerMessage(SmcDiagReq),
    );
    msg.header.flags = NLM_F_REQUEST | NLM_F_DUMP;
    msg.finalize();
    let mut buf = vec![0u8; msg.buffer_len()];
    msg.serialize(&mut buf);
    sock.send_to(&buf, &SocketAddr::new(0, 0), 0)?;
    let mut out = Vec::new();
    loop {
        let (buf, _) = sock.recv_from_full()?;
        let (mut entries, done) = parse_diag(&buf)?;
        out.append(&mut entries);
        if done {
            return Ok(out);
        }
    }
}

/// A name for an `SMC_DIAG_MODE_*` value.
pub fn mode_name(mode: u8) -> &'static str {
    match mode {
        SMC_DIAG_MODE_SMCR => "smcr",
        SMC_DIAG_MODE_FALLBACK_TCP => "fallback",
        SMC_DIAG_MODE_SMCD => "smcd",
        _ => "unknown",
    }
}

/// A name for the fallback reasons one sees on a loopback-only machine.
pub fn reason_name(reason: u32) -> String {
    let name = match reason {
        0x0303_0000 => "SMC_CLC_DECL_NOSMCDEV",
        0x0303_0001 => "SMC_CLC_DECL_NOSMCDDEV",
        0x0303_0007 => "SMC_CLC_DECL_NOSMCD2DEV",
        SMC_CLC_DECL_NOUEID => "SMC_CLC_DECL_NOUEID (no user EID: run 'sci-bench smc-setup')",
        0x0301_0000 => "SMC_CLC_DECL_PEERNOSMC",
        0x0500_0000 => "SMC_CLC_DECL_PEERDECL",
        _ => "",
    };
    if name.is_empty() {
        format!("0x{reason:08x}")
    } else {
        format!("0x{reason:08x} {name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eid_is_upper_case_blank_padded_and_nul_terminated() {
        let e = encode_eid("sci-bench").unwrap();
        assert_eq!(e.len(), 33);
        assert_eq!(&e[..9], b"SCI-BENCH");
        assert!(e[9..32].iter().all(|&b| b == b' '));
        assert_eq!(e[32], 0);
        assert_eq!(decode_eid(&e), "SCI-BENCH");
        let full = "A".repeat(32);
        assert_eq!(&encode_eid(&full).unwrap()[..32], full.as_bytes());
    }

    #[test]
    fn eid_validation() {
        assert!(encode_eid("").is_err());
        assert!(encode_eid(&"A".repeat(33)).is_err());
        assert!(encode_eid("-LEADING").is_err());
        assert!(encode_eid(".X").is_err());
        assert!(encode_eid("HAS SPACE").is_err());
        assert!(encode_eid("UNDER_SCORE").is_err());
        assert!(encode_eid("1.ok-too").is_ok());
    }

    #[test]
    fn add_ueid_message_layout() {
        let eid = encode_eid(DEFAULT_UEID).unwrap();
        // As sci_genl::Client sends it, with family id 0x1d.
        let mut genl = netlink_packet_generic::GenlMessage::from_payload(SmcGenl {
            cmd: SMC_NETLINK_ADD_UEID,
            attrs: vec![DefaultNla::new(SMC_NLA_EID_TABLE_ENTRY, eid.to_vec())],
        });
        genl.set_resolved_family_id(0x1d);
        genl.finalize();
        let mut msg = NetlinkMessage::from(genl);
        msg.header.flags = NLM_F_REQUEST | netlink_packet_core::NLM_F_ACK;
        msg.finalize();
        let mut buf = vec![0u8; msg.buffer_len()];
        msg.serialize(&mut buf);
        // nlmsghdr (16) + genlmsghdr (4) + nla header (4) + 33 bytes padded to 36.
        assert_eq!(buf.len(), 16 + 4 + 4 + 36);
        assert_eq!(u16::from_ne_bytes([buf[4], buf[5]]), 0x1d);
        assert_eq!(buf[16], SMC_NETLINK_ADD_UEID);
        assert_eq!(buf[17], SMC_GENL_FAMILY_VERSION);
        // The attribute's length counts its 33 bytes, not the padding.
        assert_eq!(u16::from_ne_bytes([buf[20], buf[21]]), 4 + 33);
        assert_eq!(
            u16::from_ne_bytes([buf[22], buf[23]]),
            SMC_NLA_EID_TABLE_ENTRY
        );
        assert_eq!(&buf[24..33], b"SCI-BENCH");
        assert_eq!(buf[24 + 32], 0);
    }

    fn nlmsg(kind: u16, payload: &[u8]) -> Vec<u8> {
        let len = 16 + payload.len();
        let mut v = Vec::new();
        v.extend_from_slice(&(len as u32).to_ne_bytes());
        v.extend_from_slice(&kind.to_ne_bytes());
        v.extend_from_slice(&2u16.to_ne_bytes()); // NLM_F_MULTI
        v.extend_from_slice(&[0; 8]);
        v.extend_from_slice(payload);
        while v.len() % 4 != 0 {
            v.push(0);
        }
        v
    }

    #[test]
    fn diag_request_and_reply() {
        let mut msg = NetlinkMessage::new(
            NetlinkHeader::default(),
            NetlinkPayload::InnerMessage(SmcDiagReq),
        );
        msg.header.flags = NLM_F_REQUEST | NLM_F_DUMP;
        msg.finalize();
        let mut buf = vec![0u8; msg.buffer_len()];
        msg.serialize(&mut buf);
        assert_eq!(buf.len(), 16 + SMC_DIAG_REQ_LEN);
        assert_eq!(u16::from_ne_bytes([buf[4], buf[5]]), SOCK_DIAG_BY_FAMILY);
        assert_eq!(buf[16], 43);

        let mut m = vec![0u8; SMC_DIAG_MSG_LEN];
        m[0] = 43;
        m[1] = 1; // SMC_ACTIVE
        m[2] = SMC_DIAG_MODE_FALLBACK_TCP;
        m[4..6].copy_from_slice(&40000u16.to_be_bytes());
        m[6..8].copy_from_slice(&5001u16.to_be_bytes());
        m[56..64].copy_from_slice(&123456u64.to_ne_bytes());
        // SMC_DIAG_SHUTDOWN (u8) then SMC_DIAG_FALLBACK {reason, peer_diagnosis}.
        m.extend_from_slice(&5u16.to_ne_bytes());
        m.extend_from_slice(&3u16.to_ne_bytes());
        m.extend_from_slice(&[0, 0, 0, 0]);
        m.extend_from_slice(&12u16.to_ne_bytes());
        m.extend_from_slice(&SMC_DIAG_FALLBACK.to_ne_bytes());
        m.extend_from_slice(&SMC_CLC_DECL_NOUEID.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        let mut dgram = nlmsg(SOCK_DIAG_BY_FAMILY, &m);
        let (e, done) = parse_diag(&dgram).unwrap();
        assert!(!done);
        assert_eq!(
            e,
            vec![DiagEntry {
                state: 1,
                mode: SMC_DIAG_MODE_FALLBACK_TCP,
                sport: 40000,
                dport: 5001,
                inode: 123456,
                fallback_reason: SMC_CLC_DECL_NOUEID,
            }]
        );
        dgram.extend(nlmsg(NLMSG_DONE, &0u32.to_ne_bytes()));
        let (e, done) = parse_diag(&dgram).unwrap();
        assert_eq!(e.len(), 1);
        assert!(done);
        let err = parse_diag(&nlmsg(NLMSG_ERROR, &(-libc::EPERM).to_ne_bytes())).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EPERM));
    }

    #[test]
    fn names() {
        assert_eq!(mode_name(SMC_DIAG_MODE_SMCD), "smcd");
        assert!(reason_name(SMC_CLC_DECL_NOUEID).contains("NOUEID"));
        assert_eq!(reason_name(0x1234), "0x00001234");
    }
}
