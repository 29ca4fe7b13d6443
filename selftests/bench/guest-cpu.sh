# shellcheck shell=bash
# The CPU the benchmark guests are given (sourced by every script that boots one): QEMU's
# "max" model without ERMS, unless VM_CPU names another. The tests keep plain "max".
#
# Why: with ERMS the guest kernel copies with `rep movsb`, which QEMU 7.2's TCG runs a byte
# per translated-block pass, so every copy of every family would weigh about four times
# what it weighs against the rest of the work on the host (without ERMS about twice). Both
# columns of every table get the same CPU. The measurements, and the rows both ways:
# Documentation/benchmarks.rst, "The emulated CPU".
export VM_CPU=${VM_CPU:-max,-erms}
