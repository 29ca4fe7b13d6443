# Sourced by selftests/install/install-guest and systemd-boot (in a guest, as root).
#
# own_machine DIR: makes this guest a machine of its own to install af_sci on: /etc a
# writable copy (in a tmpfs at DIR/etc; DIR under /run outlives a systemd boot, which
# empties /tmp), /lib/modules and /usr/local empty tmpfs, and the running kernel's module
# directory with its depmod files, as every installed kernel has. Fails on the first step
# that fails.
own_machine() {
	local kver
	kver=$(uname -r)
	mkdir -p "$1/etc" && mount -t tmpfs tmpfs "$1/etc" && cp -a /etc/. "$1/etc/" &&
		mount --bind "$1/etc" /etc &&
		mount -t tmpfs tmpfs /lib/modules && mount -t tmpfs tmpfs /usr/local &&
		mkdir -p "/lib/modules/$kver" &&
		: >"/lib/modules/$kver/modules.order" && : >"/lib/modules/$kver/modules.builtin" &&
		: >"/lib/modules/$kver/modules.builtin.modinfo" && depmod -a "$kver"
}
