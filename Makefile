# af_sci: one entry point.
#
#   make run     build everything, boot a VM, load the module, run a demo under sci-run
#   make test    host unit tests + the QEMU selftests; last line "N passed, N failed"
#
#   make deps    install what is missing (apt, rust-src, bindgen-cli); idempotent
#   make kernel  build (or reuse) the cached guest kernel in ~/.cache/af_sci
#   make module  af_sci.ko (KDIR=<any Rust-enabled kernel build> to use another kernel;
#                CLIPPY=1 to lint)
#   make tools   the Cargo workspace: libsci_preload.so, sci-run, ...
#   make test-debug  the one-guest suite, the two-guest semantics, faults and hostile-peer
#                runs and failover with the device removed, on the sanitizer kernel
#                (KASAN, kmemleak, UBSAN, fault injection; built once, cached)
#   make fuzz    the seeded syscall fuzzer on the sanitizer kernel, FUZZ_S seconds (600);
#                FUZZ_SEED=S replays a run
#   make bench   benchmarks in one QEMU guest (sci-bench over tcp/unix/smc/sci/sci-preload,
#                sockperf plain vs sci-run), then between two guests (AF_SCI over ivshmem
#                vs TCP over virtio-net), the same over ivshmem-plain (no interrupts:
#                ping-pong and streams), then fio over NBD and iSCSI between two guests
#                (selftests/bench/bench-block); tables printed, results in build/bench/;
#                on the benchmark kernel (no lockdep: kernel/bench.config; built once, cached)
#   make install / make uninstall  the module (lib/modules/KVER/updates, depmod), tools,
#                preload library, man pages, af_sci.service and example configuration
#                (DESTDIR, PREFIX=/usr/local, KDIR honoured)
#   make dkms-source  the module's source and dkms.conf in DESTDIR/usr/src/af_sci-VERSION
#   make clean

SHELL := /bin/bash
TOP := $(CURDIR)
BUILD := $(TOP)/build

# KDIR given by the user: use it as is. Otherwise the cached kernel, built on demand: the
# variant KERNEL_VARIANT names, as the target sees it (make bench sets it).
ifeq ($(origin KDIR),undefined)
KDIR = $(shell KERNEL_VARIANT=$(KERNEL_VARIANT) $(TOP)/scripts/kernel.sh --dir)
KERNEL_DEP := kernel
else
KERNEL_DEP :=
endif

.PHONY: all deps kernel module tools selftests test test-debug fuzz run clean clippy \
	install uninstall dkms-source

all: module tools selftests

deps:
	@$(TOP)/scripts/deps.sh

kernel: deps
	@$(TOP)/scripts/kernel.sh >/dev/null

# What was built for another kernel goes first: kbuild would keep a C helper or the
# generated bindings made under the other kernel's configuration (their timestamps look
# newer than the new configuration's). Only the module's own outputs: a kbuild clean of
# M=$(TOP) would sweep the whole tree (build/debug/tree, tools/target).
module: deps $(KERNEL_DEP)
	@mkdir -p $(BUILD); if [ "$$(cat $(BUILD)/module-kdir 2>/dev/null)" != "$(KDIR)" ]; then \
		find $(TOP)/rust \( -name '*.o' -o -name '.*.cmd' -o -name '.*.d' \) -type f -delete; \
		rm -f $(TOP)/rust/sys/shim_bindings.rs $(TOP)/af_sci.ko $(TOP)/af_sci.o $(TOP)/af_sci.mod*; \
		echo "$(KDIR)" >$(BUILD)/module-kdir; fi
	$(MAKE) -C $(KDIR) M=$(TOP) LLVM=1 $(if $(CLIPPY),CLIPPY=1) modules

tools: deps
	cd $(TOP)/tools && cargo build --release --quiet

# The stock iscsi_tcp (selftests/kmod/iscsi_tcp_stock): built when the unpatched source is
# there (the cached kernel's; ISCSI_STOCK_SRC= names another file).
ISCSI_STOCK_SRC ?= $(shell $(TOP)/scripts/kernel.sh --pristine 2>/dev/null)/drivers/scsi/iscsi_tcp.c

selftests: deps $(KERNEL_DEP)
	$(MAKE) -C $(KDIR) M=$(TOP)/selftests/kmod LLVM=1 modules
	@if [ -f "$(ISCSI_STOCK_SRC)" ] && grep -q '^CONFIG_ISCSI_TCP=m' $(KDIR)/.config; then \
		mkdir -p $(BUILD)/iscsi_tcp_stock && \
		cp $(TOP)/selftests/kmod/iscsi_tcp_stock/Kbuild $(BUILD)/iscsi_tcp_stock/Kbuild && \
		cmp -s $(ISCSI_STOCK_SRC) $(BUILD)/iscsi_tcp_stock/iscsi_tcp.c || \
		cp $(ISCSI_STOCK_SRC) $(BUILD)/iscsi_tcp_stock/iscsi_tcp.c; \
		$(MAKE) -C $(KDIR) M=$(BUILD)/iscsi_tcp_stock LLVM=1 modules; \
	else echo "selftests: no stock iscsi_tcp (no $(ISCSI_STOCK_SRC), or iscsi_tcp not a module)"; fi
	@mkdir -p $(BUILD)
	cc -O2 -g -Wall -Wextra -Werror -pthread -I $(TOP)/uapi -I $(TOP)/selftests/semantics \
		-o $(BUILD)/sock_semantics $(TOP)/selftests/semantics/*.c -luring

test: module tools selftests
	@KDIR=$(KDIR) $(TOP)/selftests/run-tests

# The sanitizer kernel (kernel/debug.config) and a copy of the tree built for it
# (selftests/debug/debug-tree); both cached.
test-debug: deps tools
	@$(TOP)/selftests/debug/test-debug

FUZZ_S ?= 600
fuzz: deps tools
	@tree=$$(KERNEL_VARIANT=debug $(TOP)/selftests/debug/debug-tree) && \
	KERNEL_VARIANT=debug FUZZ_S=$(FUZZ_S) $$tree/selftests/fuzz/fuzz-tests

run: module tools
	@KDIR=$(KDIR) $(TOP)/selftests/guest/demo

# Installing (scripts/install.sh; Documentation/af_sci.rst, "Installing"): DESTDIR stages,
# PREFIX (/usr/local) is where the tools go, KDIR the kernel the module is built for.
PREFIX ?= /usr/local
VERSION ?= 0.1+$(shell git -C $(TOP) rev-parse --short HEAD 2>/dev/null || echo local)
install: module tools
	@KDIR=$(KDIR) DESTDIR=$(DESTDIR) PREFIX=$(PREFIX) $(TOP)/scripts/install.sh install

uninstall:
	@DESTDIR=$(DESTDIR) PREFIX=$(PREFIX) $(TOP)/scripts/install.sh uninstall

dkms-source:
	@DESTDIR=$(DESTDIR) VERSION=$(VERSION) $(TOP)/scripts/install.sh dkms-source

# The one-CPU floor of a ping-pong between two processes (selftests/bench/futex_pingpong.c).
$(BUILD)/futex_pingpong: $(TOP)/selftests/bench/futex_pingpong.c
	@mkdir -p $(BUILD)
	cc -O2 -Wall -Wextra -Werror -o $@ $<

# One datagram's send and receive, alone (selftests/bench/dgram_cost.c, run by
# selftests/bench/dgram-cost; not part of make bench).
$(BUILD)/dgram_cost: $(TOP)/selftests/bench/dgram_cost.c
	@mkdir -p $(BUILD)
	cc -O2 -Wall -Wextra -Werror -o $@ $<

# Not part of `make test`: timings, not pass/fail (Documentation/benchmarks.rst).
# The single-guest part, then the inter-VM part (selftests/bench/bench-pair); both always run and
# print their tables, and the target fails when either failed.
# BENCH_ARGS: sci-bench options of the single-guest part; BENCH_PAIR_ARGS: of the inter-VM one.
# It boots the benchmark kernel (KERNEL_VARIANT=bench: the test kernel without lockdep and
# the other lock debugging, kernel/bench.config; built once, cached) and builds the module
# for it; the next make test builds the module for the test kernel again.
# make bench KERNEL_VARIANT= measures on the test kernel instead. Meanwhile
# selftests/bench/host-load watches what else uses the host's CPU (build/bench-host); its
# report (build/bench/host-load.txt) and the aims table say whether the run was disturbed.
.PHONY: bench
bench: export KERNEL_VARIANT ?= bench
bench: module tools $(BUILD)/futex_pingpong
	@hl=$(BUILD)/bench-host; rm -rf $$hl; mark() { $(TOP)/selftests/bench/host-load mark $$hl "$$1"; }; \
	$(TOP)/selftests/bench/host-load watch $$$$ $$hl & watcher=$$!; \
	mark one-guest; KDIR=$(KDIR) $(TOP)/selftests/bench/bench $(BENCH_ARGS); one=$$?; \
	mark inter-vm; echo; KDIR=$(KDIR) $(TOP)/selftests/bench/bench-pair $(BENCH_PAIR_ARGS); pair=$$?; \
	mark inter-vm-plain; echo; BENCH_PAIR_FABRIC=plain KDIR=$(KDIR) $(TOP)/selftests/bench/bench-pair --tests pingpong,stream; plain=$$?; \
	mark block; echo; KDIR=$(KDIR) $(TOP)/selftests/bench/bench-block; block=$$?; \
	kill $$watcher; wait $$watcher; echo; $(TOP)/selftests/bench/host-load report $$hl $(BUILD)/bench/host-load; \
	[ $$one = 0 ] || echo "make bench: the single-guest part FAILED (status $$one; its tables are above)"; \
	[ $$pair = 0 ] || echo "make bench: the inter-VM part FAILED (status $$pair)"; \
	[ $$plain = 0 ] || echo "make bench: the inter-VM part over ivshmem-plain FAILED (status $$plain)"; \
	[ $$block = 0 ] || echo "make bench: the block-device part FAILED (status $$block)"; \
	echo; $(TOP)/selftests/bench/aims; \
	[ $$one = 0 ] && [ $$pair = 0 ] && [ $$plain = 0 ] && [ $$block = 0 ]

clean:
	-$(MAKE) -C $(KDIR) M=$(TOP) LLVM=1 clean
	-$(MAKE) -C $(KDIR) M=$(TOP)/selftests/kmod LLVM=1 clean
	rm -rf $(BUILD)
	cd $(TOP)/tools && cargo clean
