# shellcheck shell=bash
# The CPU the benchmark guests are given (sourced by every script that boots one): QEMU's
# "max" model without ERMS, unless VM_CPU names another. The tests keep plain "max".
#
# Why: with ERMS ("enhanced rep movsb") the guest kernel copies every buffer of 64 bytes
# or more to and from user space with one `rep movsb` (rep_movs_alternative), as real CPUs
# that advertise ERMS run it at cache bandwidth. QEMU's TCG (7.2, Debian 12's) runs a
# `rep movs` one element per execution of a translated block, so a byte-wise `rep movsb`
# is its slowest copy. Measured on this host (2026-11-30): a copy from the page cache to
# user memory runs 22 times slower in the guest than on the host with ERMS and 11 times
# without, a hot kernel path (a pipe round trip between two threads) 6 times. With ERMS
# every copy of every family in the tables weighs about four times what it weighs against
# the rest of the work on the host, without it about twice: still more than on hardware,
# so no path gains from copies being cheaper than they are. Both columns of every table
# get the same CPU. Documentation/benchmarks.rst, "The emulated CPU", has the numbers and
# the rows measured both ways.
export VM_CPU=${VM_CPU:-max,-erms}
