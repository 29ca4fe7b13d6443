# Sourced by selftests/bench/bench and bench-pair: what a guest's UDP servers took.
# udp_in: the datagrams this guest took over UDP (Udp: InDatagrams);
# sci_in PID, sci_out PID: the datagrams PID's AF_SCI datagram sockets received and sent
# over SCI (their fdinfo "sci-datagrams: sent N received M dropped K" lines).
udp_in() { awk '/^Udp: [0-9]/ {print $2; exit}' /proc/net/snmp; }
sci_in() { cat /proc/"$1"/fdinfo/* 2>/dev/null | awk '/^sci-datagrams:/ {n += $5} END {print n + 0}'; }
sci_out() { cat /proc/"$1"/fdinfo/* 2>/dev/null | awk '/^sci-datagrams:/ {n += $3} END {print n + 0}'; }
