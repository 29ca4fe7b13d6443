#!/usr/bin/env bash
# Install everything af_sci needs, idempotently: a second run only checks (seconds).
set -euo pipefail

BINDGEN_VERSION=0.69.5   # >= 0.65.1 (Linux 6.12's minimum); pinned for reproducible bindings

packages=(
	linux-source-6.12 clang lld llvm libclang-dev flex bison bc libelf-dev libssl-dev
	busybox-static cpio kmod xz-utils make gcc libc6-dev
	liburing-dev   # selftests: io_uring on the sockets under test (selftests/semantics/uring.c)
	qemu-system-x86 iproute2 python3 curl sockperf nbd-server nbd-client
	strace   # tools/ivshmem-server tests: fault injection (delays the server's listen())
	redis-server redis-tools   # selftests: unmodified epoll programs over SCI between guests
	nginx-light wrk   # selftests: connection churn and 1000 connections (selftests/guest/sci-churn)
	iperf3   # selftests: an unmodified iperf3 across a failover (selftests/pair/pair-failover-guest)
	open-iscsi tgt libiscsi-bin fio e2fsprogs   # selftests: iSCSI over AF_SCI (selftests/guest/iscsi-sci)
	dkms   # selftests/install/dkms-test: the module built by DKMS (make dkms-source)
	dnsmasq-base bind9-dnsutils memcached   # selftests: unmodified UDP programs on AF_SCI datagram sockets (selftests/guest/sci-dgram-programs)
	ngtcp2-server ngtcp2-client openssl   # selftests: QUIC on AF_SCI datagram sockets (selftests/guest/sci-quic)
	gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-good   # selftests: RTP on AF_SCI datagram sockets (selftests/guest/sci-rtp)
	linux-perf   # make bench: the one-CPU round trip's floor (perf bench sched pipe); selftests/bench/profile-block
)

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "deps: installing ${missing[*]}" >&2
	sudo_cmd=(); [ "$(id -u)" = 0 ] || sudo_cmd=(sudo)
	"${sudo_cmd[@]}" apt-get update -qq
	DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

# /lib/modules: every machine with a kernel has it, a container may not. The install test
# mounts an empty tmpfs on it in its guest (whose root is this machine's, read-only).
if [ ! -d /lib/modules ]; then
	echo "deps: mkdir /lib/modules" >&2
	sudo_cmd=(); [ "$(id -u)" = 0 ] || sudo_cmd=(sudo)
	"${sudo_cmd[@]}" mkdir -p /lib/modules
fi

if ! rustup component list --installed 2>/dev/null | grep -q '^rust-src'; then
	echo "deps: rustup component add rust-src" >&2
	rustup component add rust-src >&2
fi

if ! bindgen --version 2>/dev/null | grep -q " $BINDGEN_VERSION\$"; then
	echo "deps: cargo install bindgen-cli $BINDGEN_VERSION" >&2
	cargo install --locked --quiet bindgen-cli --version "$BINDGEN_VERSION" >&2
fi
