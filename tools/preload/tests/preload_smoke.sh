#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Smoke test of libsci_preload.so through sci-run, on a host WITHOUT the
# af_sci module: the rewrite path is exercised by pointing SCI_FAMILY_FILE
# (a testing aid) at a file that names AF_INET6 (10) as "the AF_SCI family",
# so a rewritten socket is visible as SO_DOMAIN == 10.
#
# Usage: tools/preload/tests/preload_smoke.sh   (after cargo build --release)
# Exits non-zero on the first failure. Needs python3; uses cc, curl and
# sockperf for extra checks when they are installed.

set -u

here=$(cd -- "$(dirname -- "$0")" && pwd -P)
tools=$(cd -- "$here/../.." && pwd -P)
sci_run="$tools/sci-run"
lib="${SCI_PRELOAD_LIB:-$tools/target/release/libsci_preload.so}"
export SCI_PRELOAD_LIB="$lib"

pass=0
fail=0
skip=0
ok() { pass=$((pass + 1)); echo "ok   - $*"; }
bad() { fail=$((fail + 1)); echo "FAIL - $*"; }
skipped() { skip=$((skip + 1)); echo "skip - $*"; }

if [ ! -f "$lib" ]; then
	echo "preload_smoke: $lib missing; run 'cargo build --release' in $tools" >&2
	exit 1
fi
command -v python3 >/dev/null || { echo "preload_smoke: python3 needed" >&2; exit 1; }

work=$(mktemp -d)
srv_pid=
cleanup() {
	[ -n "$srv_pid" ] && kill "$srv_pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

printf '10\n' >"$work/family-inet6"
printf '2\n' >"$work/family-inet"              # rewrite path, same family: for IPv4-only tools
printf '255\n' >"$work/family-unsupported"   # >= AF_MAX: kernel says EAFNOSUPPORT
printf 'garbage\n' >"$work/family-garbage"
missing="$work/no-such-dir/family"

# Prints "<SO_DOMAIN of TCP/AF_INET> <of TCP/AF_INET6> <of UDP/AF_INET> <of TCP nonblock|cloexec>".
cat >"$work/domains.py" <<'PY'
import socket
def dom(*a):
    s = socket.socket(*a)
    try:
        return s.getsockopt(socket.SOL_SOCKET, socket.SO_DOMAIN)
    finally:
        s.close()
print(dom(socket.AF_INET, socket.SOCK_STREAM),
      dom(socket.AF_INET6, socket.SOCK_STREAM),
      dom(socket.AF_INET, socket.SOCK_DGRAM),
      dom(socket.AF_INET, socket.SOCK_STREAM | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC, socket.IPPROTO_TCP))
PY

run_domains() { # ENV... -- prints stdout to $work/out, stderr to $work/err (UDP left alone
	# unless ENV says otherwise: SCI_DGRAM=0 first)
	env SCI_DGRAM=0 "$@" "$sci_run" python3 "$work/domains.py" >"$work/out" 2>"$work/err"
}

expect_out() { # NAME EXPECTED
	local got
	got=$(cat "$work/out")
	if [ "$got" = "$2" ]; then ok "$1"; else bad "$1: domains '$got', expected '$2'; stderr: $(cat "$work/err")"; fi
}

expect_err_lines() { # NAME PATTERN COUNT
	local n
	n=$(grep -c -- "$2" "$work/err")
	if [ "$n" -eq "$3" ]; then ok "$1"; else bad "$1: $n stderr lines match '$2', expected $3: $(cat "$work/err")"; fi
}

# --- module not loaded ------------------------------------------------------
run_domains SCI_FAMILY_FILE="$missing" SCI_DEBUG=1
expect_out "module not loaded: sockets stay AF_INET/AF_INET6" "2 10 2 2"
expect_err_lines "module not loaded: exactly one notice per process" \
	'^sci-preload: af_sci module not loaded; sockets stay AF_INET$' 1
expect_err_lines "module not loaded: nothing else on stderr" '' 1

run_domains SCI_FAMILY_FILE="$missing"
expect_err_lines "module not loaded, no SCI_DEBUG: silent" '' 0

# The real sysfs path, as on a host without the module (skip if it is loaded).
if [ ! -e /sys/module/af_sci/parameters/family ]; then
	env -u SCI_FAMILY_FILE SCI_DEBUG=1 "$sci_run" python3 -c \
		'import socket; socket.socket(); socket.socket(); print("works")' >"$work/out" 2>"$work/err"
	if [ "$(cat "$work/out")" = works ] &&
	   [ "$(cat "$work/err")" = "sci-preload: af_sci module not loaded; sockets stay AF_INET" ]; then
		ok "sysfs family file absent: python3 works, one notice"
	else
		bad "sysfs family file absent: out '$(cat "$work/out")' err '$(cat "$work/err")'"
	fi
else
	skipped "af_sci is loaded on this host; not-loaded check on the real sysfs path"
fi

# --- rewrite path -----------------------------------------------------------
run_domains SCI_FAMILY_FILE="$work/family-inet6" SCI_DEBUG=1
expect_out "rewrite: TCP sockets get the family of the file, UDP stays" "10 10 2 10"
expect_err_lines "rewrite: one debug line per rewritten socket" \
	'^sci-preload: fd [0-9]*: family [0-9]* (AF_INET6*) -> 10 (AF_SCI)$' 2
# An AF_INET6 request is settled with setsockopt(SOL_SCI, SCI_NATIVE_FAMILY), which a
# real AF_INET6 socket standing in for AF_SCI refuses: it is kept as the program asked.
expect_err_lines "rewrite: AF_INET6 kept where SCI_NATIVE_FAMILY is refused" 'fd [0-9]*: family 10 (AF_INET6) kept' 1
expect_err_lines "rewrite: AF_INET line names both families" \
	'family 2 (AF_INET) -> 10 (AF_SCI)' 2

run_domains SCI_FAMILY_FILE="$work/family-inet6"
expect_out "rewrite without SCI_DEBUG" "10 10 2 10"

# UDP sockets: rewritten by default (SCI_DGRAM unset), and with SCI_DGRAM=1; not with 0.
env -u SCI_DGRAM SCI_FAMILY_FILE="$work/family-inet6" SCI_DEBUG=1 "$sci_run" python3 "$work/domains.py" \
	>"$work/out" 2>"$work/err"
expect_out "SCI_DGRAM unset: UDP sockets get the family of the file too" "10 10 10 10"
expect_err_lines "SCI_DGRAM unset: a debug line for the UDP socket too" \
	'^sci-preload: fd [0-9]*: family [0-9]* (AF_INET6*) -> 10 (AF_SCI)$' 3
run_domains SCI_FAMILY_FILE="$work/family-inet6" SCI_DGRAM=1
expect_out "SCI_DGRAM=1: UDP sockets rewritten" "10 10 10 10"
expect_err_lines "rewrite without SCI_DEBUG: silent" '' 0

run_domains SCI_FAMILY_FILE="$work/family-inet6" SCI_DISABLE=1 SCI_DEBUG=1
expect_out "SCI_DISABLE=1: nothing rewritten" "2 10 2 2"
expect_err_lines "SCI_DISABLE=1: one notice" '^sci-preload: disabled by SCI_DISABLE' 1

run_domains SCI_FAMILY_FILE="$work/family-inet6" SCI_DISABLE=0
expect_out "SCI_DISABLE=0: rewrite stays on" "10 10 2 10"

run_domains SCI_FAMILY_FILE="$work/family-garbage" SCI_DEBUG=1
expect_out "garbage family file: nothing rewritten" "2 10 2 2"
expect_err_lines "garbage family file: one notice" 'no valid family' 1

run_domains SCI_FAMILY_FILE="$work/family-unsupported" SCI_DEBUG=1
expect_out "EAFNOSUPPORT from the AF_SCI family: transparent fallback" "2 10 2 2"
expect_err_lines "EAFNOSUPPORT fallback: one line per socket" 'not supported (module unloaded?)' 3

# sci-run -d is SCI_DEBUG=1
env SCI_DGRAM=0 SCI_FAMILY_FILE="$work/family-inet6" "$sci_run" -d python3 "$work/domains.py" >"$work/out" 2>"$work/err"
expect_err_lines "sci-run -d turns on debug lines" '-> 10 (AF_SCI)' 2

# --- multithreaded, signal handlers (C) -------------------------------------
if command -v cc >/dev/null; then
	cat >"$work/stress.c" <<'C'
/* Threads and a SIGALRM handler create TCP sockets concurrently; every one
 * must come out with SO_DOMAIN == the expected family (argv[1]; 0: the
 * family asked for, i.e. no rewrite). */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <netinet/in.h>
#include <unistd.h>

static int want;

static int expected(int asked)
{
	return want ? want : asked;
}
static volatile sig_atomic_t bad_in_handler, handler_runs;

static int domain_of(int fd)
{
	int d = -1;
	socklen_t l = sizeof(d);
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &d, &l))
		return -1;
	return d;
}

static void on_alarm(int sig)
{
	(void)sig;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || domain_of(fd) != expected(AF_INET))
		bad_in_handler = 1;
	if (fd >= 0)
		close(fd);
	handler_runs++;
}

static void *worker(void *arg)
{
	long bad = 0;
	for (int i = 0; i < 2000; i++) {
		int asked = i & 1 ? AF_INET6 : AF_INET;
		int fd = socket(asked, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0 || domain_of(fd) != expected(asked))
			bad++;
		if (fd >= 0)
			close(fd);
	}
	(void)arg;
	return (void *)bad;
}

int main(int argc, char **argv)
{
	want = argc > 1 ? atoi(argv[1]) : 0;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval it = { { 0, 1000 }, { 0, 1000 } };
	setitimer(ITIMER_REAL, &it, NULL);

	pthread_t t[8];
	for (int i = 0; i < 8; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	long bad = 0;
	for (int i = 0; i < 8; i++) {
		void *r;
		pthread_join(t[i], &r);
		bad += (long)r;
	}
	/* make sure the handler ran a few times even on a fast machine */
	while (handler_runs < 5)
		pause();
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &off, NULL);
	printf("bad=%ld bad_in_handler=%d handler_runs>=5\n", bad, (int)bad_in_handler);
	return bad || bad_in_handler;
}
C
	if cc -O2 -pthread -o "$work/stress" "$work/stress.c" 2>"$work/cc.err"; then
		if SCI_FAMILY_FILE="$work/family-inet6" "$sci_run" "$work/stress" 10 >"$work/out" 2>&1; then
			ok "C: 8 threads + SIGALRM handler, all TCP sockets rewritten ($(cat "$work/out"))"
		else
			bad "C: threads/signal handler: $(cat "$work/out")"
		fi
		if SCI_FAMILY_FILE="$missing" "$sci_run" "$work/stress" 0 >"$work/out" 2>&1; then
			ok "C: threads + signal handler, module not loaded: nothing rewritten"
		else
			bad "C: threads/signal handler without module: $(cat "$work/out")"
		fi
	else
		skipped "C stress test: cc failed: $(cat "$work/cc.err")"
	fi
else
	skipped "C stress test: no cc"
fi

# --- real programs over loopback ---------------------------------------------
port_file="$work/port"
(cd "$work" && exec python3 - "$port_file") >/dev/null 2>&1 <<'PY' &
import http.server, os, socket, sys
class S(http.server.ThreadingHTTPServer):
    address_family = socket.AF_INET6
srv = S(("::1", 0), http.server.SimpleHTTPRequestHandler)
# Listening now (the constructor binds and listens): publish the port, in
# one step, so that the file is there only complete.
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
srv.timeout = 1
import time
end = time.time() + 60
while time.time() < end:
    srv.handle_request()
PY
srv_pid=$!
# Until the server is ready (port file) or gone: no guessed deadline, as a
# loaded host may take its time to start python3 (which ends in 60 s anyway).
while [ ! -s "$port_file" ] && kill -0 "$srv_pid" 2>/dev/null; do sleep 0.05; done
if [ -s "$port_file" ]; then
	port=$(cat "$port_file")
	if command -v curl >/dev/null; then
		if SCI_FAMILY_FILE="$work/family-inet6" SCI_DEBUG=1 "$sci_run" \
			curl -sS -m 10 -o /dev/null "http://[::1]:$port/" 2>"$work/err"; then
			ok "curl through a rewritten socket to a loopback server"
		else
			bad "curl through a rewritten socket: $(cat "$work/err")"
		fi
		expect_err_lines "curl: its AF_INET6 socket went through the rewrite" 'family 10 (AF_INET6) kept' 1
		if SCI_FAMILY_FILE="$missing" "$sci_run" curl -sS -m 10 -o /dev/null "http://[::1]:$port/" 2>"$work/err"; then
			ok "curl with the module not loaded"
		else
			bad "curl with the module not loaded: $(cat "$work/err")"
		fi
	else
		skipped "curl not installed"
	fi
	if SCI_FAMILY_FILE="$work/family-inet6" "$sci_run" python3 -c '
import sys, urllib.request
body = urllib.request.urlopen("http://[::1]:%s/" % sys.argv[1], timeout=10).read()
assert body, "empty body"' "$port" 2>"$work/err"; then
		ok "python3 urllib through a rewritten socket"
	else
		bad "python3 urllib through a rewritten socket: $(cat "$work/err")"
	fi
else
	bad "loopback HTTP server did not start"
fi

if command -v sockperf >/dev/null; then
	# sockperf (3.7) is IPv4-only, so "AF_SCI" is AF_INET (2) here: the
	# rewrite path runs (debug lines "2 -> 2") without changing addressing.
	sp_port=$((20000 + $$ % 20000))
	SCI_FAMILY_FILE="$work/family-inet" "$sci_run" timeout 20 \
		sockperf server --tcp -i 127.0.0.1 -p "$sp_port" >"$work/sp-server" 2>&1 &
	sp_pid=$!
	# Ready once its socket listens (a LISTEN, 0A, entry for the port in
	# /proc/net/tcp), not after a guessed sleep; or gone (then the client
	# fails below, with the server's output).
	sp_hex=$(printf ':%04X' "$sp_port")
	while kill -0 "$sp_pid" 2>/dev/null &&
	      ! awk -v p="$sp_hex" 'NR > 1 && substr($2, length($2) - 4) == p && $4 == "0A" { f = 1 } END { exit !f }' /proc/net/tcp; do
		sleep 0.05
	done
	if SCI_FAMILY_FILE="$work/family-inet" SCI_DEBUG=1 "$sci_run" timeout 15 \
		sockperf ping-pong --tcp -i 127.0.0.1 -p "$sp_port" -t 1 >"$work/out" 2>"$work/err" &&
	   grep -q 'Summary: Latency' "$work/out"; then
		ok "sockperf ping-pong --tcp over rewritten sockets"
	else
		bad "sockperf ping-pong: $(tail -5 "$work/out") $(cat "$work/err") $(cat "$work/sp-server")"
	fi
	expect_err_lines "sockperf: its TCP socket went through the rewrite" 'family 2 (AF_INET) -> 2 (AF_SCI)' 1
	kill "$sp_pid" 2>/dev/null
	wait "$sp_pid" 2>/dev/null
else
	skipped "sockperf not installed"
fi

# --- system-wide via /etc/ld.so.preload ---------------------------------------
# Only in a private mount namespace with an overlay on /etc: the host's
# /etc is never touched. Needs root, unshare and overlayfs; skipped otherwise.
if [ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null &&
   mkdir -p "$work/etc-upper" "$work/etc-work" &&
   printf '%s\n' "$lib" >"$work/etc-upper/ld.so.preload" &&
   unshare -m sh -c "mount -t overlay overlay -o lowerdir=/etc,upperdir=$work/etc-upper,workdir=$work/etc-work /etc" 2>/dev/null; then
	unshare -m sh -c '
		mount -t overlay overlay -o lowerdir=/etc,upperdir="$1/etc-upper",workdir="$1/etc-work" /etc || exit 99
		SCI_FAMILY_FILE="$1/family-inet6" SCI_DEBUG=1 python3 "$1/domains.py"
	' sh "$work" >"$work/out" 2>"$work/err"
	# UDP too: SCI_DGRAM is not set.
	expect_out "/etc/ld.so.preload (absolute path), no LD_PRELOAD: rewrite works" "10 10 10 10"
	expect_err_lines "/etc/ld.so.preload: debug lines" '-> 10 (AF_SCI)' 3
else
	skipped "/etc/ld.so.preload check (needs root, unshare, overlayfs)"
fi

echo "preload_smoke: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
