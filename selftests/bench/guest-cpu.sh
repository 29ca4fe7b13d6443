# shellcheck shell=bash
# The CPU the benchmark guests are given (sourced by every script that boots one): QEMU's
# "max" model without ERMS, unless VM_CPU names another.
#
# Why: with ERMS ("enhanced rep movsb") the guest kernel copies every buffer of 64 bytes
# or more to and from user space with one `rep movsb` (rep_movs_alternative), because real
# CPUs that advertise ERMS run it at cache bandwidth. QEMU's TCG (7.2, Debian 12's) runs a
# `rep movs` one element per execution of a translated block (the block ends after each
# element and restarts the instruction), so a byte-wise `rep movsb` takes eight times the
# passes of the `rep movsq` the kernel uses without ERMS. Every copy of every family in
# the tables (TCP's skb to user, AF_UNIX's, the SCI ring's) then costs several times what
# it does relative to the rest of the work on hardware, and that cost hides the
# differences between the paths. Without ERMS the guest copies a quadword per pass; both
# columns of every table get the same CPU (Documentation/benchmarks.rst, "The emulated
# CPU", has the same rows measured both ways). The tests keep plain "max".
export VM_CPU=${VM_CPU:-max,-erms}
