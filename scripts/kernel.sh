#!/usr/bin/env bash
# Build (or reuse) the guest kernel for af_sci.
#
# Three variants share the source and patches: the test kernel (kernel/af_sci.config), with
# KERNEL_VARIANT=debug the sanitizer kernel (that fragment followed by kernel/debug.config:
# KASAN, kmemleak, UBSAN, fault injection), and with KERNEL_VARIANT=bench the benchmark
# kernel (followed by kernel/bench.config: the test kernel without lockdep and the other
# debugging), each in its own directory.
#
# The build lives outside the work tree, under $AF_SCI_CACHE (default ~/.cache/af_sci),
# keyed by the Debian linux-source-6.12 package version and a hash of the config fragment
# followed by every kernel/patches/*.patch in order (KERNEL_PATCHES names another directory):
#   src-<version>/              the unpacked source, never modified (shared by every key)
#   src-<version>-p<phash>/     with patches: a hardlink copy of it (cp -al) with the patches
#                               applied (patch writes new files, breaking the links it edits);
#                               <phash> covers the patches only, so fragments share it
#   kernel-<version>-<hash>/    the O= build directory, with a .af_sci-built stamp when done
# An unchanged key reuses the build; a changed one builds a new directory. Without patches
# the key is the fragment's hash alone, as before patches existed.
#
#   scripts/kernel.sh            build if needed, then print the build directory
#   scripts/kernel.sh --dir      print the build directory without building
#   scripts/kernel.sh --pristine print the unpatched source directory (selftests build the
#                                stock iscsi_tcp from it, to show what an unpatched kernel does)
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
fragments=("${KCONFIG_FRAGMENT:-$top/kernel/af_sci.config}")
case ${KERNEL_VARIANT:-} in
"") ;;
debug) fragments+=("$top/kernel/debug.config") ;;
bench) fragments+=("$top/kernel/bench.config") ;;
*) echo "kernel.sh: unknown KERNEL_VARIANT '$KERNEL_VARIANT' (none, debug or bench)" >&2; exit 2 ;;
esac
# The fragments as one (the key and Kconfig read this).
fragment_text() { cat "${fragments[@]}"; }
cache=${AF_SCI_CACHE:-$HOME/.cache/af_sci}
version=$(dpkg-query -W -f='${Version}' linux-source-6.12 2>/dev/null) || {
	echo "kernel.sh: linux-source-6.12 is not installed (run 'make deps')" >&2; exit 1; }
patchdir=${KERNEL_PATCHES:-$top/kernel/patches}
patches=()
for p in "$patchdir"/*.patch; do [ -f "$p" ] && patches+=("$p"); done
# The patches with their names, in the order they are applied.
patch_set() { for p in "${patches[@]}"; do printf '\n# %s\n' "$(basename "$p")"; cat "$p"; done; }
hash=$( { fragment_text; patch_set; } | sha256sum | cut -c1-12)
pristine=$cache/src-$version
src=$pristine
if [ "${#patches[@]}" != 0 ]; then src=$pristine-p$(patch_set | sha256sum | cut -c1-12); fi
out=$cache/kernel-$version-$hash

if [ "${1:-}" = "--dir" ]; then echo "$out"; exit 0; fi
if [ "${1:-}" = "--pristine" ]; then echo "$pristine"; exit 0; fi
if [ -f "$out/.af_sci-built" ]; then echo "$out"; exit 0; fi

mkdir -p "$cache"
if [ ! -f "$pristine/Makefile" ]; then
	echo "kernel.sh: unpacking linux-source-6.12 $version into $pristine" >&2
	tmp=$(mktemp -d "$cache/unpack.XXXXXX")
	tar -C "$tmp" -xf /usr/src/linux-source-6.12.tar.xz
	rm -rf "$pristine"
	mv "$tmp/linux-source-6.12" "$pristine"
	rmdir "$tmp"
fi
if [ "$src" != "$pristine" ] && [ ! -f "$src/.af_sci-patched" ]; then
	echo "kernel.sh: applying ${#patches[@]} patch(es) from $patchdir in $src" >&2
	tmp=$(mktemp -d "$cache/patch.XXXXXX")
	cp -al "$pristine" "$tmp/src"
	for p in "${patches[@]}"; do
		echo "kernel.sh:   $(basename "$p")" >&2
		patch -s -p1 --forward --no-backup-if-mismatch -d "$tmp/src" < "$p" >&2 || {
			echo "kernel.sh: $(basename "$p") does not apply to Linux $version" >&2
			rm -rf "$tmp"; exit 1; }
	done
	touch "$tmp/src/.af_sci-patched"
	rm -rf "$src"
	mv "$tmp/src" "$src"
	rmdir "$tmp"
fi

mkdir -p "$out"
fragment=$out/af_sci-fragment.config
fragment_text >"$fragment"
echo "kernel.sh: configuring $out from ${fragments[*]##*/}" >&2
make -s -C "$src" O="$out" LLVM=1 KCONFIG_ALLCONFIG="$fragment" allnoconfig >&2

# Kconfig silently drops options whose dependencies are unmet; refuse such a config. A
# later fragment may set an option again (bench.config unsets the debugging): the last
# line about an option is the one that counts, as for Kconfig.
effective() {
	awk '/^CONFIG_[A-Za-z0-9_]+=/ || /^# CONFIG_[A-Za-z0-9_]+ is not set$/ {
		opt = $0; sub(/^# /, "", opt); sub(/[= ].*/, "", opt)
		if (!(opt in line)) order[n++] = opt; line[opt] = $0 }
	     END { for (i = 0; i < n; i++) print line[order[i]] }' "$fragment"
}
missing=0
while IFS= read -r line; do
	case "$line" in
	CONFIG_*=*)
		grep -qxF "$line" "$out/.config" || { echo "kernel.sh: $line was dropped by Kconfig" >&2; missing=1; } ;;
	"# CONFIG_"*" is not set")
		opt=${line#\# }; opt=${opt%% *}
		grep -q "^$opt=" "$out/.config" && { echo "kernel.sh: $opt should be unset" >&2; missing=1; } ;;
	esac
done < <(effective)
if [ "$missing" != 0 ]; then
	echo "kernel.sh: the config fragment is not fully satisfied; fix ${fragments[*]}" >&2
	exit 1
fi

echo "kernel.sh: building Linux $version in $out (about 20 minutes on 2 cores)" >&2
make -s -C "$out" LLVM=1 -j"$(nproc)" all >&2
touch "$out/.af_sci-built"
echo "$out"
