//! scictl's client of the `af_sci` generic netlink family, on the shared client
//! (`tools/genl`): its message type, its errors in the words an administrator needs, and
//! the three kinds of request it makes.

use crate::attrs::{self, cmd, SciAttr};
use netlink_packet_core::{DecodeError, Emitable, ParseableParametrized};
use netlink_packet_generic::{GenlFamily, GenlHeader};
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
            Error::Kernel(errno, msg) => sci_genl::Error::Kernel(*errno, msg.clone()).fmt(f),
            Error::Io(e) => write!(f, "netlink: {e}"),
            Error::Decode(e) => write!(f, "unexpected reply from the kernel: {e}"),
        }
    }
}

impl From<sci_genl::Error> for Error {
    fn from(e: sci_genl::Error) -> Self {
        match e {
            sci_genl::Error::NoFamily(_) => Error::NotLoaded,
            sci_genl::Error::Kernel(libc::EPERM, _) => Error::NeedsAdmin,
            sci_genl::Error::Kernel(errno, msg) => Error::Kernel(errno, msg),
            sci_genl::Error::Io(e) => Error::Io(e),
            sci_genl::Error::Decode(e) => Error::Decode(e),
        }
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

/// A connection to the `af_sci` family.
pub struct Client(sci_genl::Client<SciGenl>);

impl Client {
    /// Connects and resolves the family (`Error::NotLoaded` without the module).
    pub fn connect() -> Result<Self, Error> {
        Ok(Client(sci_genl::Client::connect()?))
    }

    /// Runs command `cmd` as a dump; returns every reply's attributes.
    pub fn dump(&mut self, cmd: u8) -> Result<Vec<Vec<SciAttr>>, Error> {
        let replies = self.0.dump(SciGenl {
            cmd,
            attrs: Vec::new(),
        })?;
        Ok(replies.into_iter().map(|m| m.attrs).collect())
    }

    /// Runs command `cmd` with `attrs`, expecting an ack.
    pub fn set(&mut self, cmd: u8, attrs: Vec<SciAttr>) -> Result<(), Error> {
        Ok(self.0.ack(SciGenl { cmd, attrs })?)
    }

    /// Runs command `cmd` (a `do` with a reply); returns the reply's attributes.
    pub fn get(&mut self, cmd: u8) -> Result<Vec<SciAttr>, Error> {
        Ok(self
            .0
            .get(SciGenl {
                cmd,
                attrs: Vec::new(),
            })?
            .attrs)
    }
}

/// The commands, for callers.
pub use cmd::{
    LINK_DROP, NODE_GET, NODE_SET, PORT_GET, PORT_SET, PUBLISH_SET, SOCK_GET, STATS_GET,
};
