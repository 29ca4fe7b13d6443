//! scictl: configure and inspect af_sci through its generic netlink family.
//!
//! ```text
//! scictl [--json] load [--nodes FILE] [--ports FILE] [--check]
//! scictl [--json] nodes | ports | sockets | stats
//! scictl drop-link NODE
//! scictl [--json] publish [on|off]
//! ```
//!
//! See `tools/man/scictl.8`.

mod attrs;
mod config;
mod filter;
mod model;
mod nl;
mod output;

use attrs::SciAttr;
use clap::{CommandFactory, Parser, Subcommand};
use nl::Client;
use std::io::Write;
use std::process::ExitCode;

const DEFAULT_NODES: &str = "/etc/af_sci/nodes.conf";
const DEFAULT_PORTS: &str = "/etc/af_sci/ports.conf";
const DEFAULT_PRELOAD: &str = "/etc/af_sci/preload.conf";

/// What `scictl --help` says after the commands.
const FILES_HELP: &str = "\
nodes.conf: one 'ADDRESS NODEID' per line (IPv4 or IPv6 address, decimal id).
ports.conf: one 'include|exclude PORT[-PORT]' per line.
preload.conf: one 'sci|tcp PROGRAM [ROLE [ADDRESS[/PREFIX] [PORT[-PORT]]]]' per line.
'#' starts a comment in all three. See scictl(8).";

/// Configure and inspect the af_sci module (generic netlink family "af_sci").
#[derive(Debug, Parser, PartialEq, Eq)]
#[command(name = "scictl", version, after_help = FILES_HELP)]
struct Args {
    /// Print JSON instead of tables.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand, PartialEq, Eq)]
enum Command {
    /// Replace the node map and the port rules with the files' contents (a missing
    /// default file counts as empty). Needs CAP_NET_ADMIN.
    Load {
        /// The node map [default: /etc/af_sci/nodes.conf].
        #[arg(long, value_name = "FILE")]
        nodes: Option<String>,
        /// The port rules [default: /etc/af_sci/ports.conf].
        #[arg(long, value_name = "FILE")]
        ports: Option<String>,
        /// Only check the files (and the preload's rules).
        #[arg(long)]
        check: bool,
        /// The preload's rules, checked with --check [default: /etc/af_sci/preload.conf].
        #[arg(long, value_name = "FILE")]
        preload: Option<String>,
    },
    /// The node map (ADDRESS NODE).
    Nodes,
    /// The port rules (ACTION PORTS).
    Ports,
    /// The AF_SCI sockets of this network namespace.
    #[command(
        after_help = "FILTER, as ss(8) writes it; every term must hold: mode sci|native, \
reason NAME, state NAME, node N, sport|dport [OP] :PORT (OP: = != < > <= >=), \
src|dst ADDR[:PORT]."
    )]
    Sockets {
        /// Datagram sockets instead of stream sockets (as ss -u; STATE UNCONN or ESTAB).
        #[arg(short = 'u', long)]
        udp: bool,
        /// Terms the sockets shown must meet.
        #[arg(value_name = "FILTER")]
        filter: Vec<String>,
    },
    /// The counters of this network namespace.
    Stats,
    /// Drop the fabric link to node NODE as if it had failed: its connections move onto
    /// TCP (or reset where the peer is unreachable); the fabric links again once both
    /// nodes are alive. Needs CAP_NET_ADMIN.
    DropLink {
        /// The node's id.
        node: u32,
    },
    /// Whether this network namespace publishes its addresses; on or off changes it,
    /// which needs CAP_NET_ADMIN in the initial user namespace.
    ///
    /// A namespace that publishes has its addresses in the fabric's node table: peers
    /// route SCI connections to them to this node, which serves them in this namespace.
    /// The initial network namespace always publishes. Run it inside the namespace
    /// (ip netns exec NAME scictl publish on).
    Publish {
        /// Start or stop publishing; none: show whether this namespace publishes.
        #[arg(value_enum, value_name = "on|off")]
        state: Option<OnOff>,
    },
    /// What the preload's rules (preload.conf) do with the sockets of PROGRAM.
    PreloadRules {
        /// The program's name (as /proc/PID/comm has it: its first 15 bytes).
        program: String,
        /// The rule file [default: /etc/af_sci/preload.conf].
        #[arg(long, value_name = "FILE")]
        preload: Option<String>,
    },
    /// Print a completion script for SHELL (bash, zsh, fish, elvish, powershell).
    Completions { shell: clap_complete::Shell },
}

/// What `scictl publish` makes of this network namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum OnOff {
    /// Publish this namespace's addresses.
    On,
    /// Stop publishing them.
    Off,
}

/// A failure: the message and the exit status.
struct Failure(String, u8);

impl Failure {
    /// A usage error the arguments' parser could not see (status 2, as clap's own).
    fn usage(msg: impl Into<String>) -> Self {
        Failure(format!("{}\n(scictl --help for usage)", msg.into()), 2)
    }
}

impl From<nl::Error> for Failure {
    fn from(e: nl::Error) -> Self {
        Failure(e.to_string(), 1)
    }
}

/// Checks the preload's rule file (a missing default file holds no rule).
fn check_preload(given: Option<&str>) -> Result<(), Failure> {
    read_preload(given).map(|_| ())
}

/// The preload's rule file: its path, its text and its rules; an error names the line.
fn read_preload(
    given: Option<&str>,
) -> Result<(String, String, sci_preload_rules::Rules), Failure> {
    let (path, text) = read_config(given, DEFAULT_PRELOAD)?;
    let rules = sci_preload_rules::Rules::parse(text.as_bytes())
        .map_err(|e| Failure(format!("{path}:{}: {e}", e.line), 1))?;
    Ok((path, text, rules))
}

/// `scictl preload-rules PROGRAM`: what the preload does with the program's sockets.
fn preload_rules(json: bool, program: &str, given: Option<&str>) -> Result<(), Failure> {
    use sci_preload_rules::{ProgramVerdict, NAME_MAX};
    let (path, text, rules) = read_preload(given)?;
    // The kernel keeps the first 15 bytes of a program's name.
    let comm = &program.as_bytes()[..program.len().min(NAME_MAX)];
    let lines: Vec<&str> = text.lines().collect();
    let applying: Vec<(u32, &str)> = rules
        .iter()
        .filter(|r| r.applies_to(comm))
        .map(|r| (r.line, lines[r.line as usize - 1].trim()))
        .collect();
    let name = String::from_utf8_lossy(comm);
    let (verdict, summary) = match rules.program_verdict(comm) {
        ProgramVerdict::Sci => ("sci", format!("the TCP sockets of '{name}' become AF_SCI")),
        ProgramVerdict::Tcp(line) => (
            "tcp",
            format!("the sockets of '{name}' stay TCP ({path}:{line})"),
        ),
        ProgramVerdict::PerSocket => (
            "per-socket",
            format!(
                "the TCP sockets of '{name}' become AF_SCI; each connect and listen is \
                 matched against the rules below (the first that matches decides; none: AF_SCI)"
            ),
        ),
    };
    let mut text_out = format!("{summary}\n");
    for (line, rule) in &applying {
        text_out.push_str(&format!("  {path}:{line}: {rule}\n"));
    }
    print(
        json,
        serde_json::json!({
            "program": name,
            "verdict": verdict,
            "rules": applying.iter().map(|(l, r)| serde_json::json!({"line": l, "rule": r})).collect::<Vec<_>>(),
        }),
        text_out,
    )
}

/// `scictl publish [on|off]`: makes this network namespace publish its addresses or
/// stop, or says whether it does.
fn publish(json: bool, state: Option<OnOff>) -> Result<(), Failure> {
    let mut client = Client::connect()?;
    let Some(state) = state else {
        let publishes = model::stats(&client.get(nl::STATS_GET)?)
            .publishes
            .ok_or_else(|| {
                Failure(
                    "the af_sci module does not say whether this network namespace \
                     publishes its addresses (a module older than scictl)"
                        .into(),
                    1,
                )
            })?;
        return print(
            json,
            output::publish_json(publishes),
            output::publish_text(publishes),
        );
    };
    let on = state == OnOff::On;
    let (doing, done) = if on {
        (
            "making this network namespace publish its addresses",
            "this network namespace publishes its addresses",
        )
    } else {
        (
            "making this network namespace stop publishing its addresses",
            "this network namespace no longer publishes its addresses",
        )
    };
    client
        .set(nl::PUBLISH_SET, vec![SciAttr::Publish(on.into())])
        .map_err(|e| Failure(format!("{doing}: {e}"), 1))?;
    print(json, output::publish_json(on), format!("{done}\n"))
}

/// Reads a configuration file; a missing default file is empty.
fn read_config(given: Option<&str>, default: &str) -> Result<(String, String), Failure> {
    let path = given.unwrap_or(default);
    match std::fs::read_to_string(path) {
        Ok(text) => Ok((path.to_owned(), text)),
        Err(e) if given.is_none() && e.kind() == std::io::ErrorKind::NotFound => {
            Ok((path.to_owned(), String::new()))
        }
        Err(e) => Err(Failure(format!("{path}: {e}"), 1)),
    }
}

fn print(json: bool, value: serde_json::Value, text: String) -> Result<(), Failure> {
    let out = if json { format!("{value:#}\n") } else { text };
    std::io::stdout()
        .write_all(out.as_bytes())
        .map_err(|e| Failure(format!("stdout: {e}"), 1))
}

fn load(json: bool, nodes: Option<&str>, ports: Option<&str>, check: bool) -> Result<(), Failure> {
    let (nodes_path, nodes_text) = read_config(nodes, DEFAULT_NODES)?;
    let (ports_path, ports_text) = read_config(ports, DEFAULT_PORTS)?;
    let nodes =
        config::parse_nodes(&nodes_path, &nodes_text).map_err(|e| Failure(e.to_string(), 1))?;
    let ports =
        config::parse_ports(&ports_path, &ports_text).map_err(|e| Failure(e.to_string(), 1))?;
    if !check {
        let mut client = Client::connect()?;
        let node_attrs = nodes
            .iter()
            .map(|n| SciAttr::Node(model::node_attrs(n)))
            .collect();
        let port_attrs = ports
            .iter()
            .map(|r| SciAttr::PortRule(model::port_attrs(r)))
            .collect();
        client
            .set(nl::NODE_SET, node_attrs)
            .map_err(|e| Failure(format!("setting the node map: {e}"), 1))?;
        client
            .set(nl::PORT_SET, port_attrs)
            .map_err(|e| Failure(format!("setting the port rules: {e}"), 1))?;
    }
    let verb = if check { "checked" } else { "loaded" };
    print(
        json,
        serde_json::json!({
            "nodes": nodes.len(),
            "port_rules": ports.len(),
            "loaded": !check,
        }),
        format!(
            "{verb} {} node map entries ({nodes_path}) and {} port rules ({ports_path})\n",
            nodes.len(),
            ports.len()
        ),
    )
}

fn run(args: Args) -> Result<(), Failure> {
    match args.command {
        Command::Load {
            nodes,
            ports,
            check,
            preload,
        } => {
            if check {
                check_preload(preload.as_deref())?;
            }
            load(args.json, nodes.as_deref(), ports.as_deref(), check)
        }
        Command::PreloadRules { program, preload } => {
            preload_rules(args.json, &program, preload.as_deref())
        }
        Command::DropLink { node } => {
            Client::connect()?
                .set(
                    nl::LINK_DROP,
                    vec![SciAttr::Node(vec![attrs::NodeAttr::Id(node)])],
                )
                .map_err(|e| Failure(format!("dropping the link to node {node}: {e}"), 1))?;
            print(
                args.json,
                serde_json::json!({ "dropped": node }),
                format!("dropped the link to node {node}\n"),
            )
        }
        Command::Publish { state } => publish(args.json, state),
        Command::Nodes => {
            let nodes = model::nodes(&Client::connect()?.dump(nl::NODE_GET)?);
            print(
                args.json,
                output::nodes_json(&nodes),
                output::nodes_text(&nodes),
            )
        }
        Command::Ports => {
            let rules = model::ports(&Client::connect()?.dump(nl::PORT_GET)?);
            print(
                args.json,
                output::ports_json(&rules),
                output::ports_text(&rules),
            )
        }
        Command::Sockets { udp, filter } => {
            let filter = filter::Filter::parse(&filter)
                .map_err(|e| Failure::usage(format!("sockets: {e}")))?;
            let mut socks = model::sockets(&Client::connect()?.dump(nl::SOCK_GET)?);
            socks.retain(|s| s.is_dgram() == udp && filter.matches(s));
            print(
                args.json,
                output::sockets_json(&socks),
                if udp {
                    output::dgram_sockets_text(&socks)
                } else {
                    output::sockets_text(&socks)
                },
            )
        }
        Command::Stats => {
            let stats = model::stats(&Client::connect()?.get(nl::STATS_GET)?);
            print(
                args.json,
                output::stats_json(&stats),
                output::stats_text(&stats),
            )
        }
        Command::Completions { shell } => {
            clap_complete::generate(
                shell,
                &mut Args::command(),
                "scictl",
                &mut std::io::stdout(),
            );
            Ok(())
        }
    }
}

fn main() -> ExitCode {
    // Usage errors and --help/--version exit as clap decides (2 for a usage error).
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure(msg, status)) => {
            eprintln!("scictl: {msg}");
            ExitCode::from(status)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Result<Args, clap::Error> {
        Args::try_parse_from(std::iter::once("scictl").chain(v.iter().copied()))
    }

    #[test]
    fn argument_parsing() {
        let a = args(&["--json", "load", "--nodes", "/tmp/n", "--ports=/tmp/p"]).unwrap();
        assert_eq!(
            a,
            Args {
                json: true,
                command: Command::Load {
                    nodes: Some("/tmp/n".into()),
                    ports: Some("/tmp/p".into()),
                    check: false,
                    preload: None,
                },
            }
        );
        let a = args(&["sockets", "--json"]).unwrap();
        assert!(a.json);
        assert_eq!(
            a.command,
            Command::Sockets {
                udp: false,
                filter: vec![]
            }
        );
        let a = args(&["sockets", "-u", "state", "unconn"]).unwrap();
        assert_eq!(
            a.command,
            Command::Sockets {
                udp: true,
                filter: vec!["state".into(), "unconn".into()]
            }
        );
        // Usage errors exit with status 2.
        for bad in [
            &["nodes", "--nodes", "x"][..],
            &["load", "--nodes"],
            &["--bogus"],
            &["nodes", "ports"],
            &[],
            &["drop-link", "x"],
            &["publish", "maybe"],
            &["publish", "on", "off"],
            &["publish", "ON"],
        ] {
            assert_eq!(args(bad).unwrap_err().exit_code(), 2, "{bad:?}");
        }
        let a = args(&["sockets", "mode", "sci", "dport", "=", ":6379", "--json"]).unwrap();
        assert_eq!(
            a.command,
            Command::Sockets {
                udp: false,
                filter: ["mode", "sci", "dport", "=", ":6379"]
                    .map(String::from)
                    .to_vec()
            }
        );
        assert!(a.json);
        assert_eq!(
            args(&["drop-link", "3"]).unwrap().command,
            Command::DropLink { node: 3 }
        );
        assert_eq!(
            args(&["publish", "on"]).unwrap().command,
            Command::Publish {
                state: Some(OnOff::On)
            }
        );
        assert_eq!(
            args(&["publish", "off"]).unwrap().command,
            Command::Publish {
                state: Some(OnOff::Off)
            }
        );
        let a = args(&["publish", "--json"]).unwrap();
        assert!(a.json);
        assert_eq!(a.command, Command::Publish { state: None });
        Args::command().debug_assert();
    }

    #[test]
    fn missing_default_files_are_empty_but_given_ones_are_not() {
        let (_, text) = read_config(None, "/nonexistent/af_sci/nodes.conf")
            .ok()
            .unwrap();
        assert!(text.is_empty());
        let e = read_config(Some("/nonexistent/af_sci/nodes.conf"), DEFAULT_NODES)
            .err()
            .unwrap();
        assert!(
            e.0.starts_with("/nonexistent/af_sci/nodes.conf: "),
            "{}",
            e.0
        );
    }

    #[test]
    fn kernel_errors_read_clearly() {
        assert!(nl::Error::NotLoaded
            .to_string()
            .starts_with("af_sci module not loaded"));
        assert!(nl::Error::NeedsAdmin
            .to_string()
            .starts_with("needs CAP_NET_ADMIN"));
        let e = nl::Error::Kernel(libc::EINVAL, Some("address listed twice".into()));
        assert_eq!(
            e.to_string(),
            "Invalid argument (os error 22): address listed twice"
        );
    }

    /// The values of an enum's entries in the uapi header (implicit ones counted).
    fn enum_values(header: &str, name: &str) -> Vec<(String, i64)> {
        let start = header.find(&format!("enum {name} {{")).unwrap();
        let body = &header[start..];
        let body = &body[body.find('{').unwrap() + 1..body.find("};").unwrap()];
        let mut next = 0;
        let mut out = Vec::new();
        for line in body.lines() {
            // A comment's continuation line names nothing.
            if line.trim_start().starts_with('*') {
                continue;
            }
            let line = line
                .split("/*")
                .next()
                .unwrap()
                .trim()
                .trim_end_matches(',');
            if line.is_empty() {
                continue;
            }
            let (ident, value) = match line.split_once('=') {
                Some((i, v)) => (i.trim(), v.trim().parse().unwrap()),
                None => (line, next),
            };
            out.push((ident.to_owned(), value));
            next = value + 1;
        }
        out
    }

    #[test]
    fn attribute_numbers_agree_with_the_uapi_header() {
        let header = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../uapi/linux/af_sci.h"
        ))
        .unwrap();
        let check = |name: &str, prefix: &str, ours: &[(&str, i64)]| {
            let values = enum_values(&header, name);
            for (ident, value) in ours {
                let full = format!("{prefix}{ident}");
                let found = values.iter().find(|(i, _)| *i == full);
                assert_eq!(found.map(|f| f.1), Some(*value), "{full}");
            }
        };
        use attrs::*;
        check(
            "sci_cmd",
            "SCI_CMD_",
            &[
                ("NODE_GET", cmd::NODE_GET.into()),
                ("NODE_SET", cmd::NODE_SET.into()),
                ("PORT_GET", cmd::PORT_GET.into()),
                ("PORT_SET", cmd::PORT_SET.into()),
                ("SOCK_GET", cmd::SOCK_GET.into()),
                ("STATS_GET", cmd::STATS_GET.into()),
                ("LINK_DROP", cmd::LINK_DROP.into()),
                ("PUBLISH_SET", cmd::PUBLISH_SET.into()),
            ],
        );
        check(
            "sci_attr",
            "SCI_A_",
            &[
                ("NODE", a::NODE.into()),
                ("PORT_RULE", a::PORT_RULE.into()),
                ("SOCK", a::SOCK.into()),
                ("STATS", a::STATS.into()),
                ("PUBLISH", a::PUBLISH.into()),
            ],
        );
        check(
            "sci_node_attr",
            "SCI_NODE_A_",
            &[
                ("ADDR4", node_a::ADDR4.into()),
                ("ADDR6", node_a::ADDR6.into()),
                ("ID", node_a::ID.into()),
                ("SOURCE", node_a::SOURCE.into()),
            ],
        );
        check(
            "sci_node_source",
            "SCI_NODE_SOURCE_",
            &[
                ("FILE", node_source::FILE.into()),
                ("FABRIC", node_source::FABRIC.into()),
            ],
        );
        check(
            "sci_port_attr",
            "SCI_PORT_A_",
            &[
                ("ACTION", port_a::ACTION.into()),
                ("LOW", port_a::LOW.into()),
                ("HIGH", port_a::HIGH.into()),
            ],
        );
        check(
            "sci_sock_attr",
            "SCI_SOCK_A_",
            &[
                ("PAD", sock_a::PAD.into()),
                ("FAMILY", sock_a::FAMILY.into()),
                ("LOCAL_ADDR4", sock_a::LOCAL_ADDR4.into()),
                ("LOCAL_ADDR6", sock_a::LOCAL_ADDR6.into()),
                ("LOCAL_PORT", sock_a::LOCAL_PORT.into()),
                ("PEER_ADDR4", sock_a::PEER_ADDR4.into()),
                ("PEER_ADDR6", sock_a::PEER_ADDR6.into()),
                ("PEER_PORT", sock_a::PEER_PORT.into()),
                ("MODE", sock_a::MODE.into()),
                ("FALLBACK", sock_a::FALLBACK.into()),
                ("STATE", sock_a::STATE.into()),
                ("QUEUE_FILL", sock_a::QUEUE_FILL.into()),
                ("INODE", sock_a::INODE.into()),
                ("COOKIE", sock_a::COOKIE.into()),
                ("NODE", sock_a::NODE.into()),
                ("RECV_Q", sock_a::RECV_Q.into()),
                ("SEND_Q", sock_a::SEND_Q.into()),
                ("TYPE", sock_a::TYPE.into()),
                ("IMPLICIT_OUT", sock_a::IMPLICIT_OUT.into()),
                ("IMPLICIT_IN", sock_a::IMPLICIT_IN.into()),
                ("DGRAM_SENT", sock_a::DGRAM_SENT.into()),
                ("DGRAM_RECEIVED", sock_a::DGRAM_RECEIVED.into()),
                ("DGRAM_DROPPED", sock_a::DGRAM_DROPPED.into()),
            ],
        );
        check(
            "sci_stats_attr",
            "SCI_STATS_A_",
            &[
                ("PAD", stats_a::PAD.into()),
                ("SOCKETS", stats_a::SOCKETS.into()),
                ("SCI_CONNECTIONS", stats_a::SCI_CONNECTIONS.into()),
                ("FALLBACK", stats_a::FALLBACK.into()),
                ("REFUSALS_REMEMBERED", stats_a::REFUSALS_REMEMBERED.into()),
                ("IMPLICIT_CONNECTIONS", stats_a::IMPLICIT_CONNECTIONS.into()),
                ("DGRAM_SENT", stats_a::DGRAM_SENT.into()),
                ("DGRAM_RECEIVED", stats_a::DGRAM_RECEIVED.into()),
                ("DGRAM_DROPPED", stats_a::DGRAM_DROPPED.into()),
                ("READ_SOCK_LENT", stats_a::READ_SOCK_LENT.into()),
                ("READ_SOCK_COPIED", stats_a::READ_SOCK_COPIED.into()),
                ("READ_SOCK_KEPT", stats_a::READ_SOCK_KEPT.into()),
                ("DIRECT_RECEIVED", stats_a::DIRECT_RECEIVED.into()),
                ("READ_SOCK_DEFERRED", stats_a::READ_SOCK_DEFERRED.into()),
            ],
        );
        check(
            "sci_fallback_attr",
            "SCI_FALLBACK_A_",
            &[
                ("PAD", fallback_a::PAD.into()),
                ("REASON", fallback_a::REASON.into()),
                ("COUNT", fallback_a::COUNT.into()),
            ],
        );
        assert!(header.contains(&format!("#define SCI_GENL_NAME\t\t\"{FAMILY_NAME}\"")));
        assert!(header.contains(&format!("#define SCI_GENL_VERSION\t{FAMILY_VERSION}")));
    }
}
