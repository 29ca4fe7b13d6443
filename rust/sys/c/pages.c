// SPDX-License-Identifier: GPL-2.0
/* af_sci C helpers, user pages: see pages.h. */
#include <linux/mm.h>
#include <linux/slab.h>
#include "pages.h"

struct sci_pinned {
	struct page **pages;
	unsigned int npages;
	/* Where the buffer starts in pages[0], and its length. */
	size_t offset;
	size_t len;
};

struct sci_pinned *sci_pin_iter(struct iov_iter *iter, size_t max, size_t *len)
{
	struct sci_pinned *p;
	ssize_t got;

	*len = 0;
	/* Only user memory is pinned (FOLL_PIN); a kernel caller's kvec or bvec is not. */
	if (!user_backed_iter(iter) || iov_iter_rw(iter) != ITER_DEST ||
	    !iov_iter_extract_will_pin(iter) || !max)
		return NULL;
	p = kzalloc(sizeof(*p), GFP_KERNEL);
	if (!p)
		return NULL;
	got = iov_iter_extract_pages(iter, &p->pages, max, DIV_ROUND_UP(max, PAGE_SIZE) + 1,
				     0, &p->offset);
	if (got <= 0) {
		/* The array may have been allocated before the pinning failed. */
		kvfree(p->pages);
		kfree(p);
		return NULL;
	}
	p->len = got;
	p->npages = DIV_ROUND_UP(p->offset + got, PAGE_SIZE);
	*len = got;
	return p;
}

size_t sci_pinned_fill(struct sci_pinned *p, size_t len, struct iov_iter *from)
{
	size_t done = 0;

	len = min(len, p->len);
	while (done < len) {
		size_t pos = p->offset + done;
		size_t off = offset_in_page(pos);
		size_t n = min_t(size_t, len - done, PAGE_SIZE - off);
		size_t c = copy_page_from_iter(p->pages[pos >> PAGE_SHIFT], off, n, from);

		done += c;
		if (c < n)
			break;
	}
	return done;
}

void sci_pinned_free(struct sci_pinned *p)
{
	unpin_user_pages_dirty_lock(p->pages, p->npages, true);
	kvfree(p->pages);
	kfree(p);
}

void sci_iter_revert(struct iov_iter *iter, size_t n)
{
	iov_iter_revert(iter, n);
}
