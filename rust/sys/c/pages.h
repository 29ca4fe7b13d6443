/* SPDX-License-Identifier: GPL-2.0 */
/*
 * af_sci C helpers, user pages: a reader's receive buffer pinned so that a writer in this
 * kernel can copy straight into it (the loopback fabric's direct receive,
 * rust/fabric/direct.rs, through rust/sys/pinned.rs).
 */
#ifndef AF_SCI_SYS_PAGES_H
#define AF_SCI_SYS_PAGES_H

#include <linux/types.h>
#include <linux/uio.h>

/* The pinned pages of part of a reader's buffer; opaque to Rust. */
struct sci_pinned;

/*
 * Pins up to max bytes of the destination iterator iter from where it stands (user
 * memory only: ITER_UBUF or ITER_IOVEC, one segment's worth), and advances iter over
 * them.  Returns NULL when nothing could be pinned (kernel memory, a fault on the first
 * page, no memory): iter is then unchanged.  *len is the byte count pinned.
 */
struct sci_pinned *sci_pin_iter(struct iov_iter *iter, size_t max, size_t *len);
/*
 * Copies up to len bytes from the source iterator from into the pinned buffer, from its
 * start; returns the count copied (short on a fault in from's memory).
 */
size_t sci_pinned_fill(struct sci_pinned *p, size_t len, struct iov_iter *from);
/* Unpins the pages (marked dirty: they may have been written) and frees p. */
void sci_pinned_free(struct sci_pinned *p);
/* Moves iter back by n bytes (iov_iter_revert). */
void sci_iter_revert(struct iov_iter *iter, size_t n);

#endif /* AF_SCI_SYS_PAGES_H */
