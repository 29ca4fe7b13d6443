# Sourced in the guests of selftests/bench/bench-block and profile-block (vm-pair's A, the
# initiator at 10.0.0.1, and B, the servers at 10.0.0.2): the waits, the fabric, and
# NBD's and iSCSI's set-up on both sides, which the two share. The caller sets top, role,
# ctl, scictl and sci_run, and defines fail MESSAGE (it does not return).

A=10.0.0.1 B=10.0.0.2

# A sleep that does not fork (read with a timeout on a pipe nobody writes): a forked
# sleep(1) costs a TCG guest milliseconds of CPU (its exec and dynamic loading), which
# B's waits during A's measurements took from tgtd and nbd-server.
exec {idle}<> <(:)
nap() { read -r -t "$1" -u "$idle"; }
# wait_file NAME SECONDS: until $ctl/NAME exists.
wait_file() {
	local end=$((SECONDS + $2))
	until [ -e "$ctl/$1" ]; do [ $SECONDS -lt $end ] || return 1; nap 0.1; done
	return 0 # (not nap's status: a read that timed out)
}
# wait_for SECONDS CMD...: until CMD succeeds.
wait_for() {
	local end=$((SECONDS + $1))
	shift
	until "$@"; do [ $SECONDS -lt $end ] || return 1; nap 0.2; done
	return 0 # (not nap's status: a read that timed out)
}

# af_sci on the ivshmem region (A node 0, B node 1), the node map, and the link up.
fabric_up() {
	local node
	node=$([ "$role" = a ] && echo 0 || echo 1)
	insmod "$top/af_sci.ko" fabric=ivshmem node_id="$node" ivshmem_nodes=2 || fail "insmod"
	printf '%s 0\n%s 1\n' $A $B >/tmp/nodes.conf
	"$scictl" load --nodes /tmp/nodes.conf --ports /dev/null || fail "scictl load"
	wait_for 240 sh -c "dmesg | grep -q 'linked with node $((1 - node))'" || fail "no fabric link"
}

# A: sci_end PORT: A's end of the connection to B:PORT is in mode sci
sci_end() {
	"$scictl" --json sockets | python3 -c "
import json, sys
s = [x for x in json.load(sys.stdin) if (x['peer'] or {}).get('port') == $1 and x['state'] == 'ESTAB']
sys.exit(0 if len(s) == 1 and s[0]['mode'] == 'sci' else 1)"
}

# B: a 64 MiB disk (tmpfs) served by nbd-server plain on :10809 and by its own nbd-server
# under sci-run on :10810. Daemons, not -d: nbd-server -d serves one client and exits, and
# A attaches more than once.
nbd_servers() {
	local p
	for p in 10809 10810; do
		truncate -s 64M /tmp/nbd-$p.img
		printf '[generic]\n\tlistenaddr = %s\n\tport = %s\n[disk]\n\texportname = /tmp/nbd-%s.img\n' \
			$B $p $p >/tmp/nbd-$p.conf
	done
	nbd-server -C /tmp/nbd-10809.conf -p /tmp/nbd-10809.pid >/tmp/nbd-10809.log 2>&1 || fail "nbd-server :10809"
	"$sci_run" nbd-server -C /tmp/nbd-10810.conf -p /tmp/nbd-10810.pid >/tmp/nbd-10810.log 2>&1 ||
		fail "nbd-server :10810"
}

# A: nbd_attach tcp|sci attaches /dev/nbd0 to B's server (:10809, or :10810 with
# nbd-client under sci-run) and sets nbd_port and nbd_disk; nbd_detach detaches it.
nbd_attach() {
	local run
	nbd_port=$([ "$1" = tcp ] && echo 10809 || echo 10810)
	run=$([ "$1" = sci ] && echo "$sci_run")
	timeout 60 $run nbd-client $B $nbd_port /dev/nbd0 -N disk -b 4096 >/tmp/nbd-client.log 2>&1 ||
		fail "nbd-client :$nbd_port"
	nbd_disk=/dev/nbd0
}
nbd_detach() {
	nbd-client -d /dev/nbd0 >/dev/null 2>&1
	wait_for 30 sh -c 'test "$(cat /sys/block/nbd0/size)" = 0' || fail "nbd0 still attached"
}

# B: a 64 MiB disk (tmpfs) served by tgtd plain on :3260 and by its own tgtd under
# sci-run on :3261 (control port 3261).
iscsi_targets() {
	local p run
	for p in 3260 3261; do
		truncate -s 64M /tmp/iscsi-$p.img
		run=$([ $p = 3261 ] && echo "$sci_run")
		$run tgtd -f -C $p --iscsi portal=$B:$p >/tmp/tgtd-$p.log 2>&1 &
		wait_for 30 tgtadm -C $p --lld iscsi --op show --mode target || fail "tgtd :$p"
		tgtadm -C $p --lld iscsi --op new --mode target --tid 1 -T iqn.2026-11.org.af-sci:bench-$p &&
			tgtadm -C $p --lld iscsi --op new --mode logicalunit --tid 1 --lun 1 -b /tmp/iscsi-$p.img &&
			tgtadm -C $p --lld iscsi --op bind --mode target --tid 1 -I ALL || fail "tgtadm :$p"
	done
}

# A: the initiator's modules and a private /etc/iscsi.
iscsi_initiator() {
	local m
	for m in scsi_transport_iscsi libiscsi libiscsi_tcp iscsi_tcp; do
		[ -d /sys/module/$m ] || insmod "$VM_KDIR/drivers/scsi/$m.ko" || fail "insmod $m"
	done
	mount -t tmpfs iscsi-etc /etc/iscsi && mkdir -p /run/lock/iscsi || fail "/etc/iscsi"
	echo "InitiatorName=iqn.2026-11.org.af-sci:bench" >/etc/iscsi/initiatorname.iscsi
	printf 'node.startup = manual\nnode.session.auth.authmethod = None\n' >/etc/iscsi/iscsid.conf
}

# A: iscsi_login tcp|sci starts iscsid (under sci-run for sci), logs in to B's target
# (:3260 or :3261) and sets iscsi_port and iscsi_disk; iscsi_logout ends the session and
# iscsid.
iscsi_login() {
	local run
	iscsi_port=$([ "$1" = tcp ] && echo 3260 || echo 3261)
	run=$([ "$1" = sci ] && echo "$sci_run")
	setsid $run iscsid -f >/tmp/iscsid-"$1".log 2>&1 &
	wait_for 30 grep -q '@ISCSIADM_ABSTRACT_NAMESPACE' /proc/net/unix || fail "iscsid"
	$run iscsiadm -m discovery -t sendtargets -p $B:$iscsi_port >/dev/null 2>&1 || fail "discovery :$iscsi_port"
	timeout 120 $run iscsiadm -m node -T iqn.2026-11.org.af-sci:bench-$iscsi_port -p $B:$iscsi_port --login \
		>/dev/null 2>&1 || fail "login :$iscsi_port"
	wait_for 60 sh -c 'ls /sys/class/iscsi_session/session*/device/target*/*:*:*:1/block 2>/dev/null | grep -q .' ||
		fail "no iSCSI disk"
	iscsi_disk=/dev/$(ls /sys/class/iscsi_session/session*/device/target*/*:*:*:1/block | head -n 1)
}
iscsi_logout() {
	local run
	run=$([ "$1" = sci ] && echo "$sci_run")
	timeout 60 $run iscsiadm -m node -T iqn.2026-11.org.af-sci:bench-$iscsi_port -p $B:$iscsi_port --logout >/dev/null 2>&1
	timeout 30 $run iscsiadm -k 0 >/dev/null 2>&1
	wait_for 30 sh -c '! ls /sys/class/iscsi_session 2>/dev/null | grep -q .' || fail "session left"
}
