//! scictl: configure and inspect af_sci through its generic netlink family.
//!
//! ```text
//! scictl [--json] load [--nodes FILE] [--ports FILE] [--check]
//! scictl [--json] nodes | ports | sockets | stats
//! scictl drop-link NODE
//! ```
//!
//! See `tools/man/scictl.8`.

mod attrs;
mod config;
mod filter;
mod model;
mod nl;

use attrs::SciAttr;
use nl::Client;
use std::io::Write;
use std::process::ExitCode;

const DEFAULT_NODES: &str = "/etc/af_sci/nodes.conf";
const DEFAULT_PORTS: &str = "/etc/af_sci/ports.conf";

const USAGE: &str = "\
usage: scictl [--json] COMMAND [OPTIONS]

Configure and inspect the af_sci module (generic netlink family \"af_sci\").

commands:
  load [--nodes FILE] [--ports FILE] [--check]
           replace the node map and the port rules with the files' contents
           (default /etc/af_sci/nodes.conf and /etc/af_sci/ports.conf; a missing
           default file counts as empty); --check only checks the files.
           Needs CAP_NET_ADMIN.
  nodes    the node map (ADDRESS NODE)
  ports    the port rules (ACTION PORTS)
  sockets [FILTER]
           the AF_SCI sockets of this network namespace; FILTER as ss(8) writes
           it, every term must hold: mode sci|native, reason NAME, state NAME,
           node N, sport|dport [OP] :PORT (OP: = != < > <= >=), src|dst ADDR[:PORT]
  stats    the counters of this network namespace
  drop-link NODE
           drop the fabric link to node NODE as if it had failed: its connections
           move onto TCP (or reset where the peer is unreachable); the fabric links
           again once both nodes are alive. Needs CAP_NET_ADMIN.

options:
  --json     print JSON instead of tables
  -h, --help this text

nodes.conf: one 'ADDRESS NODEID' per line (IPv4 or IPv6 address, decimal id).
ports.conf: one 'include|exclude PORT[-PORT]' per line.
'#' starts a comment in both.
";

/// A failure: the message and the exit status.
struct Failure(String, u8);

impl Failure {
    fn usage(msg: impl Into<String>) -> Self {
        Failure(format!("{}\n(scictl --help for usage)", msg.into()), 2)
    }
}

impl From<nl::Error> for Failure {
    fn from(e: nl::Error) -> Self {
        Failure(e.to_string(), 1)
    }
}

#[derive(Debug, Default, PartialEq, Eq)]
struct Args {
    json: bool,
    help: bool,
    command: Option<String>,
    nodes: Option<String>,
    ports: Option<String>,
    check: bool,
    /// The node of `drop-link`.
    node: Option<String>,
    /// The filter words of `sockets`.
    filter: Vec<String>,
}

fn parse_args(args: &[String]) -> Result<Args, Failure> {
    let mut out = Args::default();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| Failure::usage(format!("{name} needs a file name")))
        };
        match arg.as_str() {
            "--json" => out.json = true,
            "-h" | "--help" => out.help = true,
            "--check" => out.check = true,
            "--nodes" => out.nodes = Some(value("--nodes")?),
            "--ports" => out.ports = Some(value("--ports")?),
            s if s.starts_with("--nodes=") => out.nodes = Some(s["--nodes=".len()..].to_owned()),
            s if s.starts_with("--ports=") => out.ports = Some(s["--ports=".len()..].to_owned()),
            s if s.starts_with('-') => return Err(Failure::usage(format!("unknown option {s}"))),
            s if out.command.is_none() => out.command = Some(s.to_owned()),
            s if out.command.as_deref() == Some("drop-link") && out.node.is_none() => {
                out.node = Some(s.to_owned())
            }
            s if out.command.as_deref() == Some("sockets") => out.filter.push(s.to_owned()),
            s => return Err(Failure::usage(format!("unexpected argument '{s}'"))),
        }
    }
    let load = out.command.as_deref() == Some("load");
    if !load && (out.nodes.is_some() || out.ports.is_some() || out.check) {
        return Err(Failure::usage(
            "--nodes, --ports and --check go with 'load'",
        ));
    }
    Ok(out)
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

fn load(args: &Args) -> Result<(), Failure> {
    let (nodes_path, nodes_text) = read_config(args.nodes.as_deref(), DEFAULT_NODES)?;
    let (ports_path, ports_text) = read_config(args.ports.as_deref(), DEFAULT_PORTS)?;
    let nodes =
        config::parse_nodes(&nodes_path, &nodes_text).map_err(|e| Failure(e.to_string(), 1))?;
    let ports =
        config::parse_ports(&ports_path, &ports_text).map_err(|e| Failure(e.to_string(), 1))?;
    if !args.check {
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
    let verb = if args.check { "checked" } else { "loaded" };
    print(
        args.json,
        serde_json::json!({
            "nodes": nodes.len(),
            "port_rules": ports.len(),
            "loaded": !args.check,
        }),
        format!(
            "{verb} {} node map entries ({nodes_path}) and {} port rules ({ports_path})\n",
            nodes.len(),
            ports.len()
        ),
    )
}

fn run(args: &Args) -> Result<(), Failure> {
    let Some(command) = args.command.as_deref() else {
        return Err(Failure::usage("no command given"));
    };
    match command {
        "load" => load(args),
        "drop-link" => {
            let node: u32 = args
                .node
                .as_deref()
                .ok_or_else(|| Failure::usage("drop-link needs a node id"))?
                .parse()
                .map_err(|_| Failure::usage("the node id is a number"))?;
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
        "nodes" => {
            let nodes = model::nodes(&Client::connect()?.dump(nl::NODE_GET)?);
            print(
                args.json,
                model::nodes_json(&nodes),
                model::nodes_text(&nodes),
            )
        }
        "ports" => {
            let rules = model::ports(&Client::connect()?.dump(nl::PORT_GET)?);
            print(
                args.json,
                model::ports_json(&rules),
                model::ports_text(&rules),
            )
        }
        "sockets" => {
            let filter = filter::Filter::parse(&args.filter)
                .map_err(|e| Failure::usage(format!("sockets: {e}")))?;
            let mut socks = model::sockets(&Client::connect()?.dump(nl::SOCK_GET)?);
            socks.retain(|s| filter.matches(s));
            print(
                args.json,
                model::sockets_json(&socks),
                model::sockets_text(&socks),
            )
        }
        "stats" => {
            let stats = model::stats(&Client::connect()?.get(nl::STATS_GET)?);
            print(
                args.json,
                model::stats_json(&stats),
                model::stats_text(&stats),
            )
        }
        other => Err(Failure::usage(format!("unknown command '{other}'"))),
    }
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let result = parse_args(&argv).and_then(|args| {
        if args.help {
            print!("{USAGE}");
            Ok(())
        } else {
            run(&args)
        }
    });
    match result {
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

    fn args(v: &[&str]) -> Result<Args, Failure> {
        parse_args(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn argument_parsing() {
        let a = args(&["--json", "load", "--nodes", "/tmp/n", "--ports=/tmp/p"])
            .ok()
            .unwrap();
        assert_eq!(
            a,
            Args {
                json: true,
                command: Some("load".into()),
                nodes: Some("/tmp/n".into()),
                ports: Some("/tmp/p".into()),
                ..Args::default()
            }
        );
        let a = args(&["sockets", "--json"]).ok().unwrap();
        assert!(a.json);
        assert_eq!(a.command.as_deref(), Some("sockets"));
        assert_eq!(args(&["nodes", "--nodes", "x"]).err().unwrap().1, 2);
        assert_eq!(args(&["load", "--nodes"]).err().unwrap().1, 2);
        assert_eq!(args(&["--bogus"]).err().unwrap().1, 2);
        assert_eq!(args(&["nodes", "ports"]).err().unwrap().1, 2);
        let a = args(&["sockets", "mode", "sci", "dport", "=", ":6379", "--json"])
            .ok()
            .unwrap();
        assert_eq!(a.filter, ["mode", "sci", "dport", "=", ":6379"]);
        assert!(a.json);
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
            ],
        );
        check(
            "sci_node_attr",
            "SCI_NODE_A_",
            &[
                ("ADDR4", node_a::ADDR4.into()),
                ("ADDR6", node_a::ADDR6.into()),
                ("ID", node_a::ID.into()),
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
