#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# install.sh install|uninstall|dkms-source: what `make install`, `make uninstall` and
# `make dkms-source` do, on files already built (the Makefile builds them first).
#
#   install      af_sci.ko into $DESTDIR/lib/modules/$KVER/updates/ (then depmod), the
#                tools and libsci_preload.so into $DESTDIR$PREFIX/{bin,lib}, the man
#                pages, scictl's bash and zsh completions, af_sci.service into $PREFIX/lib/systemd/system/, and commented
#                examples of /etc/af_sci/nodes.conf, ports.conf, preload.conf and
#                /etc/modprobe.d/af_sci.conf (an existing one is never overwritten).
#                Every file written is listed in $PREFIX/share/af_sci/installed.
#   uninstall    removes what that list names, and the list; a configuration file
#                the administrator changed is kept (and said so).
#   dkms-source  the module's source and dkms.conf into $DESTDIR/usr/src/af_sci-$VERSION
#                (then: dkms add af_sci/$VERSION; dkms build ...; dkms install ...).
#
# Environment: KDIR (the kernel tree the module was built against; KVER is its release),
# DESTDIR (a staging root: depmod is left to the packager), PREFIX (/usr/local),
# SYSCONFDIR (/etc), VERSION (the DKMS package version).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd -P)
prog=${0##*/}
DESTDIR=${DESTDIR:-}
PREFIX=${PREFIX:-/usr/local}
SYSCONFDIR=${SYSCONFDIR:-/etc}
manifest=$DESTDIR$PREFIX/share/af_sci/installed

die() { echo "$prog: $*" >&2; exit 1; }

kver() {
	[ -n "${KDIR:-}" ] || die "KDIR is not set (the kernel tree af_sci.ko was built against)"
	[ -f "$KDIR/include/config/kernel.release" ] || die "$KDIR: no include/config/kernel.release (not a built kernel tree)"
	cat "$KDIR/include/config/kernel.release"
}

# new_dirs DIR: the directories (as DIR/) that creating DIR below DESTDIR would make.
new_dirs() {
	local d=$1
	while [ -n "$d" ] && [ ! -d "$DESTDIR$d" ]; do
		echo "$d/"
		d=${d%/*}
	done
}
# put MODE SRC DEST: installs one file and lists it, and the directories it creates.
put() {
	new_dirs "${3%/*}" >>"$manifest.new"
	install -D -m "$1" "$2" "$DESTDIR$3"
	echo "$3" >>"$manifest.new"
}
# put_text MODE DEST: put, of what comes on standard input.
put_text() {
	cat >"$manifest.text"
	put "$1" "$manifest.text" "$2"
	rm -f "$manifest.text"
}
# put_config SRC DEST: an example configuration file, only where none is.
put_config() {
	if [ -e "$DESTDIR$2" ]; then
		echo "$prog: $2 exists; left as it is (the example is $1)"
	else
		put 0644 "$1" "$2"
	fi
}

install_all() {
	local kver bin
	kver=$(kver)
	bin=$top/tools/target/release
	for f in "$top/af_sci.ko" "$bin/scictl" "$bin/sci-bench" "$bin/ivshmem-server" "$bin/libsci_preload.so"; do
		[ -f "$f" ] || die "$f is not built (run make install, which builds it)"
	done
	# Files a previous install listed stay listed (uninstall removes them all).
	if [ -f "$manifest" ]; then
		cp "$manifest" "$manifest.new"
	else
		local made
		made=$(new_dirs "$PREFIX/share/af_sci")
		mkdir -p "${manifest%/*}"
		echo "$made" >"$manifest.new"
	fi
	put 0644 "$top/af_sci.ko" "/lib/modules/$kver/updates/af_sci.ko"
	for t in scictl sci-bench ivshmem-server; do
		put 0755 "$bin/$t" "$PREFIX/bin/$t"
	done
	put 0755 "$bin/libsci_preload.so" "$PREFIX/lib/libsci_preload.so"
	# sci-run looks for the library next to itself, then where this install put it.
	sed "s|/usr/local/lib/libsci_preload.so|$PREFIX/lib/libsci_preload.so|g" "$top/tools/sci-run" |
		put_text 0755 "$PREFIX/bin/sci-run"
	# Shell completions, from scictl itself (clap writes them).
	"$bin/scictl" completions bash | put_text 0644 "$PREFIX/share/bash-completion/completions/scictl"
	"$bin/scictl" completions zsh | put_text 0644 "$PREFIX/share/zsh/site-functions/_scictl"
	for m in "$top"/tools/man/*.[18]; do
		put 0644 "$m" "$PREFIX/share/man/man${m##*.}/${m##*/}"
	done
	sed "s|@PREFIX@|$PREFIX|g" "$top/dist/af_sci.service.in" |
		put_text 0644 "$PREFIX/lib/systemd/system/af_sci.service"
	put_config "$top/dist/nodes.conf" "$SYSCONFDIR/af_sci/nodes.conf"
	put_config "$top/dist/ports.conf" "$SYSCONFDIR/af_sci/ports.conf"
	put_config "$top/dist/preload.conf" "$SYSCONFDIR/af_sci/preload.conf"
	put_config "$top/dist/modprobe.d-af_sci.conf" "$SYSCONFDIR/modprobe.d/af_sci.conf"
	sort -u "$manifest.new" >"$manifest" && rm -f "$manifest.new"
	if [ -z "$DESTDIR" ]; then
		depmod -a "$kver"
		echo "$prog: installed for kernel $kver; modprobe af_sci loads it (systemctl enable --now af_sci at boot)"
	else
		echo "$prog: staged in $DESTDIR for kernel $kver (depmod -a $kver there once installed)"
	fi
}

# The shipped example a configuration file was installed from (none: not a config file).
example_of() {
	case $1 in
	"$SYSCONFDIR/af_sci/nodes.conf") echo "$top/dist/nodes.conf" ;;
	"$SYSCONFDIR/af_sci/ports.conf") echo "$top/dist/ports.conf" ;;
	"$SYSCONFDIR/af_sci/preload.conf") echo "$top/dist/preload.conf" ;;
	"$SYSCONFDIR/modprobe.d/af_sci.conf") echo "$top/dist/modprobe.d-af_sci.conf" ;;
	esac
}

uninstall_all() {
	local f example kver= dirs=()
	[ -f "$manifest" ] || die "nothing to uninstall: no $manifest (make install writes it)"
	while IFS= read -r f; do
		case $f in
		"") continue ;;
		*/) dirs+=("$f"); continue ;;
		esac
		example=$(example_of "$f")
		if [ -n "$example" ] && [ -f "$DESTDIR$f" ] && ! cmp -s "$example" "$DESTDIR$f"; then
			echo "$prog: $f was changed; kept"
			continue
		fi
		rm -f "$DESTDIR$f"
		case $f in /lib/modules/*/updates/af_sci.ko) kver=${f#/lib/modules/}; kver=${kver%%/*} ;; esac
	done <"$manifest"
	rm -f "$manifest"
	# The directories the install created, deepest first, where they are empty now.
	for f in $(printf '%s\n' "${dirs[@]}" | sort -r); do
		rmdir "$DESTDIR$f" 2>/dev/null || true
	done
	if [ -z "$DESTDIR" ] && [ -n "$kver" ] && [ -d "/lib/modules/$kver" ]; then
		depmod -a "$kver"
	fi
	echo "$prog: uninstalled"
}

dkms_source() {
	local version=${VERSION:?VERSION is not set} dest
	dest=$DESTDIR/usr/src/af_sci-$version
	rm -rf "$dest" && mkdir -p "$dest"
	# The module's own sources: what Kbuild builds from, and dkms-check.
	(cd "$top" && git ls-files -z Kbuild rust uapi dist) | (cd "$top" && xargs -0 cp --parents -t "$dest")
	sed "s|@VERSION@|$version|g" "$top/dist/dkms.conf.in" >"$dest/dkms.conf"
	echo "$dest"
}

case ${1:-} in
install) install_all ;;
uninstall) uninstall_all ;;
dkms-source) dkms_source ;;
*) die "usage: $prog install|uninstall|dkms-source" ;;
esac
