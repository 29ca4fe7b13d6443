# Sourced in the guest by selftests/bench/bench, bench-pair, icount-floor and profile-udp,
# by make run's demo (selftests/guest/demo) and by the guest suite
# (selftests/guest/guest-suite): the helpers they share.
#
# step TEXT: a heading in the console log.
step() { printf '== %s\n' "$*"; }
# wait_for SECONDS CMD...: runs CMD every 0.2 s until it succeeds (status 0) or SECONDS
# have passed (status 1).
wait_for() { local end=$((SECONDS + $1)); shift; until "$@"; do [ $SECONDS -lt $end ] || return 1; sleep 0.2; done; }
# median_col N: the median of column N of the lines on standard input ("nan" for none).
median_col() { awk -v c="$1" '{print $c}' | sort -g | awk '{v[NR]=$1} END {if (NR==0) print "nan"; else if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
# server_ready LOG: the sockperf server writing LOG has started to wait for its first message.
server_ready() { grep -q 'block on socket' "$1"; }
# sci_fds PID: how many of PID's descriptors are AF_SCI sockets (their fdinfo has sci-mode);
# has_sci_fds PID: at least one; sci_modes PID: their modes, sorted, joined by '/'.
sci_fds() { grep -l '^sci-mode:' /proc/"$1"/fdinfo/* 2>/dev/null | wc -l; }
has_sci_fds() { [ "$(sci_fds "$1")" -ge 1 ]; }
sci_modes() { cat /proc/"$1"/fdinfo/* 2>/dev/null | sed -n 's/^sci-mode:[[:space:]]*//p' | sort -u | paste -sd/; }
# sleeps PID: how often PID has gone to sleep (its voluntary context switches).
sleeps() { awk '/^voluntary_ctxt_switches:/ {print $2}' /proc/"$1"/status; }
# udp_bound PORT: a UDP socket of this guest (IPv4 or IPv6) is bound to PORT.
udp_bound() { grep -qi ":$(printf %04X "$1") " /proc/net/udp /proc/net/udp6; }
# What a guest's UDP servers took. udp_in: the datagrams this guest took over UDP (Udp:
# InDatagrams); sci_in PID, sci_out PID: the datagrams PID's AF_SCI datagram sockets
# received and sent over SCI (their fdinfo "sci-datagrams: sent N received M dropped K" lines).
udp_in() { awk '/^Udp: [0-9]/ {print $2; exit}' /proc/net/snmp; }
sci_in() { cat /proc/"$1"/fdinfo/* 2>/dev/null | awk '/^sci-datagrams:/ {n += $5} END {print n + 0}'; }
sci_out() { cat /proc/"$1"/fdinfo/* 2>/dev/null | awk '/^sci-datagrams:/ {n += $3} END {print n + 0}'; }
