//! How scictl prints what the kernel reports (`model.rs`): aligned text, or JSON with
//! `--json`.

use crate::config::range_text;
use crate::model::{mode_name, reason_name, state_name, NodeRow, NodeSource, Sock, Stats};
use sci_config::rules::PortRule;
use serde_json::{json, Value};
use std::net::SocketAddr;

fn family_name(family: u16) -> &'static str {
    match family {
        2 => "inet",
        10 => "inet6",
        _ => "unknown",
    }
}

/// `ADDR:PORT` (`[ADDR]:PORT` for IPv6), `*:*` when unset.
fn endpoint(addr: Option<SocketAddr>) -> String {
    addr.map_or_else(|| "*:*".to_owned(), |a| a.to_string())
}

/// Left-aligned columns separated by two spaces (the last one not padded).
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let mut out = String::new();
    let header: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let last = row.len().saturating_sub(1);
        let mut line = String::new();
        for (i, (cell, w)) in row.iter().zip(&widths).enumerate() {
            if i == last {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<w$}  "));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The SOURCE of a row: published entries are not used while a node map is loaded
/// (the administrator's map is authoritative).
fn node_source(row: &NodeRow, map_loaded: bool) -> (&'static str, bool) {
    match row.source {
        NodeSource::File => ("file", true),
        NodeSource::Fabric => ("fabric", !map_loaded),
    }
}

/// Whether the rows hold a loaded node map.
fn map_loaded(rows: &[NodeRow]) -> bool {
    rows.iter().any(|r| r.source == NodeSource::File)
}

/// `scictl nodes`.
pub fn nodes_text(nodes: &[NodeRow]) -> String {
    let loaded = map_loaded(nodes);
    let rows: Vec<Vec<String>> = nodes
        .iter()
        .map(|n| {
            let (source, used) = node_source(n, loaded);
            let source = if used {
                source.to_owned()
            } else {
                format!("{source} (unused: a node map is loaded)")
            };
            vec![n.entry.addr.to_string(), n.entry.node.to_string(), source]
        })
        .collect();
    table(&["ADDRESS", "NODE", "SOURCE"], &rows)
}

/// `scictl nodes --json`.
pub fn nodes_json(nodes: &[NodeRow]) -> Value {
    let loaded = map_loaded(nodes);
    Value::Array(
        nodes
            .iter()
            .map(|n| {
                let (source, used) = node_source(n, loaded);
                json!({
                    "address": n.entry.addr.to_string(),
                    "node": n.entry.node,
                    "source": source,
                    "used": used,
                })
            })
            .collect(),
    )
}

/// `scictl ports`.
pub fn ports_text(rules: &[PortRule]) -> String {
    let rows: Vec<Vec<String>> = rules
        .iter()
        .map(|r| vec![r.action().name().to_owned(), range_text(r)])
        .collect();
    table(&["ACTION", "PORTS"], &rows)
}

/// `scictl ports --json`.
pub fn ports_json(rules: &[PortRule]) -> Value {
    Value::Array(
        rules
            .iter()
            .map(|r| json!({ "action": r.action().name(), "low": r.low(), "high": r.high() }))
            .collect(),
    )
}

/// `scictl sockets`: the columns of `ss -t` (state, queues, addresses), then the path
/// (mode, fallback reason, peer node) and the inode.
pub fn sockets_text(socks: &[Sock]) -> String {
    let rows: Vec<Vec<String>> = socks
        .iter()
        .map(|s| {
            let mut row = ss_columns(s);
            row.push(s.node.map_or_else(|| "-".to_owned(), |n| n.to_string()));
            row.push(s.inode.to_string());
            row
        })
        .collect();
    table(&[SS_HEADS, &["NODE", "INODE"]].concat(), &rows)
}

/// The columns `ss` shows (state, queues, addresses), then the mode and fallback reason:
/// the first columns of both socket tables.
const SS_HEADS: &[&str] = &[
    "STATE", "RECV-Q", "SEND-Q", "LOCAL", "PEER", "MODE", "REASON",
];

fn ss_columns(s: &Sock) -> Vec<String> {
    vec![
        state_name(s.state).to_owned(),
        s.recv_q.to_string(),
        s.send_q.to_string(),
        endpoint(s.local),
        endpoint(s.peer),
        mode_name(s.mode).to_owned(),
        reason_name(s.fallback),
    ]
}

/// `scictl sockets --udp`: as `ss -u` shows them, then the path (mode, fallback reason),
/// the implicit SCI connections (to destinations/from peers), the datagrams sent,
/// received and dropped over SCI, and the inode.
pub fn dgram_sockets_text(socks: &[Sock]) -> String {
    let rows: Vec<Vec<String>> = socks
        .iter()
        .map(|s| {
            let d = s.dgram.unwrap_or_default();
            let mut row = ss_columns(s);
            row.extend([
                format!("{}/{}", d.implicit_out, d.implicit_in),
                d.sent.to_string(),
                d.received.to_string(),
                d.dropped.to_string(),
                s.inode.to_string(),
            ]);
            row
        })
        .collect();
    table(
        &[
            SS_HEADS,
            &["OUT/IN", "SENT", "RECEIVED", "DROPPED", "INODE"],
        ]
        .concat(),
        &rows,
    )
}

fn endpoint_json(addr: Option<SocketAddr>) -> Value {
    addr.map_or(
        Value::Null,
        |a| json!({ "address": a.ip().to_string(), "port": a.port() }),
    )
}

/// `scictl sockets --json`.
pub fn sockets_json(socks: &[Sock]) -> Value {
    Value::Array(
        socks
            .iter()
            .map(|s| {
                let mut v = json!({
                    "type": if s.is_dgram() { "dgram" } else { "stream" },
                    "family": family_name(s.family),
                    "local": endpoint_json(s.local),
                    "peer": endpoint_json(s.peer),
                    "mode": mode_name(s.mode),
                    "fallback": reason_name(s.fallback),
                    "state": state_name(s.state),
                    "queue_fill": s.queue_fill,
                    "recv_q": s.recv_q,
                    "send_q": s.send_q,
                    "node": s.node,
                    "inode": s.inode,
                    "cookie": s.cookie,
                });
                if let Some(d) = s.dgram {
                    v["implicit"] = json!({ "out": d.implicit_out, "in": d.implicit_in });
                    v["datagrams"] =
                        json!({ "sent": d.sent, "received": d.received, "dropped": d.dropped });
                }
                v
            })
            .collect(),
    )
}

/// `scictl stats`.
pub fn stats_text(stats: &Stats) -> String {
    let mut out = format!(
        "sockets created:  {}\nsci connections:  {}\nfallbacks:\n",
        stats.sockets, stats.sci_connections
    );
    let width = stats
        .fallbacks
        .iter()
        .map(|(r, _)| reason_name(*r).len())
        .max()
        .unwrap_or(0);
    for (reason, count) in &stats.fallbacks {
        out.push_str(&format!("  {:<width$}  {count}\n", reason_name(*reason)));
    }
    out.push_str(&format!(
        "peer-rejected at once (a remembered refusal, no peer asked):  {}\n",
        stats.refusals_remembered
    ));
    out.push_str(&format!(
        "implicit connections (datagram sockets):  {}\n\
         datagrams over SCI:  sent {}  received {}  dropped {}\n",
        stats.implicit_connections, stats.dgram_sent, stats.dgram_received, stats.dgram_dropped
    ));
    out.push_str(&format!(
        "read_sock:  {} bytes in place, {} copied, {} kept buffers, {} reads deferred\n",
        stats.read_sock_lent,
        stats.read_sock_copied,
        stats.read_sock_kept,
        stats.read_sock_deferred
    ));
    out.push_str(&format!(
        "filled directly (one copy):  {} bytes\n",
        stats.direct_received
    ));
    if let Some(publishes) = stats.publishes {
        let yes = if publishes { "yes" } else { "no" };
        out.push_str(&format!("publishes addresses:  {yes}\n"));
    }
    out
}

/// `scictl stats --json`.
pub fn stats_json(stats: &Stats) -> Value {
    let fallbacks: serde_json::Map<String, Value> = stats
        .fallbacks
        .iter()
        .map(|(r, c)| (reason_name(*r), json!(c)))
        .collect();
    let mut v = json!({
        "sockets": stats.sockets,
        "sci_connections": stats.sci_connections,
        "fallbacks": fallbacks,
        "refusals_remembered": stats.refusals_remembered,
        "implicit_connections": stats.implicit_connections,
        "datagrams": {
            "sent": stats.dgram_sent,
            "received": stats.dgram_received,
            "dropped": stats.dgram_dropped,
        },
        "read_sock": {
            "lent": stats.read_sock_lent,
            "copied": stats.read_sock_copied,
            "kept": stats.read_sock_kept,
            "deferred": stats.read_sock_deferred,
        },
        "direct_received": stats.direct_received,
    });
    if let Some(publishes) = stats.publishes {
        v["publishes"] = json!(publishes);
    }
    v
}

/// `scictl publish` without an argument: whether this network namespace publishes its
/// addresses, and how to make it if it does not.
pub fn publish_text(publishes: bool) -> String {
    if publishes {
        "this network namespace publishes its addresses\n".to_owned()
    } else {
        "this network namespace does not publish its addresses \
         (scictl publish on, with CAP_NET_ADMIN, makes it)\n"
            .to_owned()
    }
}

/// `scictl publish --json`.
pub fn publish_json(publishes: bool) -> Value {
    json!({ "publishes": publishes })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::tests::sample_socks;

    #[test]
    fn sockets_as_text() {
        let text = sockets_text(&sample_socks());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "STATE   RECV-Q  SEND-Q  LOCAL            PEER            MODE    REASON         NODE  INODE"
        );
        assert_eq!(
            lines[1],
            "ESTAB   0       0       127.0.0.1:40000  127.0.0.1:22    native  port-excluded  -     1234"
        );
        assert_eq!(
            lines[2],
            "LISTEN  2       128     [::1]:8080       *:*             native  no-fabric      -     5"
        );
        assert_eq!(
            lines[3],
            "ESTAB   4096    70000   127.0.0.1:5000   127.0.0.1:5001  sci     none           0     6"
        );
    }

    #[test]
    fn sockets_as_json() {
        let v = sockets_json(&sample_socks());
        assert_eq!(v[0]["fallback"], "port-excluded");
        assert_eq!(v[0]["local"]["address"], "127.0.0.1");
        assert_eq!(v[0]["local"]["port"], 40000);
        assert_eq!(v[0]["state"], "ESTAB");
        assert_eq!(v[0]["node"], Value::Null);
        assert_eq!(v[1]["family"], "inet6");
        assert_eq!(v[1]["peer"], Value::Null);
        assert_eq!(v[2]["mode"], "sci");
        assert_eq!(v[2]["node"], 0);
        assert_eq!(v[2]["queue_fill"], 4096);
        assert_eq!(
            (v[1]["recv_q"].clone(), v[1]["send_q"].clone()),
            (2.into(), 128.into())
        );
    }

    #[test]
    fn nodes_and_ports_as_text_and_json() {
        let entries = crate::config::parse_nodes("n", "10.0.0.1 1\nfd00::2 22\n").unwrap();
        let row = |i: usize, source| NodeRow {
            entry: entries[i],
            source,
        };
        let file = [row(0, NodeSource::File), row(1, NodeSource::File)];
        assert_eq!(
            nodes_text(&file),
            "ADDRESS   NODE  SOURCE\n10.0.0.1  1     file\nfd00::2   22    file\n"
        );
        assert_eq!(nodes_text(&[]), "ADDRESS  NODE  SOURCE\n");
        assert_eq!(
            nodes_json(&file),
            json!([
                {"address": "10.0.0.1", "node": 1, "source": "file", "used": true},
                {"address": "fd00::2", "node": 22, "source": "file", "used": true}
            ])
        );
        // Published entries are used only while no node map is loaded.
        let fabric = [row(0, NodeSource::Fabric)];
        assert_eq!(
            nodes_text(&fabric),
            "ADDRESS   NODE  SOURCE\n10.0.0.1  1     fabric\n"
        );
        let both = [row(1, NodeSource::File), row(0, NodeSource::Fabric)];
        assert_eq!(
            nodes_text(&both),
            "ADDRESS   NODE  SOURCE\nfd00::2   22    file\n\
             10.0.0.1  1     fabric (unused: a node map is loaded)\n"
        );
        assert_eq!(
            nodes_json(&both)[1],
            json!({"address": "10.0.0.1", "node": 1, "source": "fabric", "used": false})
        );
        let rules = crate::config::parse_ports("p", "include 5000-5999\nexclude 22\n").unwrap();
        assert_eq!(
            ports_text(&rules),
            "ACTION   PORTS\ninclude  5000-5999\nexclude  22\n"
        );
        assert_eq!(
            ports_json(&rules),
            json!([
                {"action": "include", "low": 5000, "high": 5999},
                {"action": "exclude", "low": 22, "high": 22}
            ])
        );
    }
}
