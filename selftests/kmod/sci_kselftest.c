// SPDX-License-Identifier: GPL-2.0
/*
 * sci_kselftest: drives AF_SCI sockets from the kernel, as kernel socket users such as
 * the NBD driver do: sockets created with sock_create_kern(), kernel_bind/listen/
 * connect/accept, data through kernel_sendmsg/kernel_recvmsg with kvec iterators and
 * sock_sendmsg/sock_recvmsg with bvec iterators (the iterators NBD and splice use), and
 * kernel_sock_shutdown().
 *
 * The test runs when the module is loaded: "insmod sci_kselftest.ko family=27" succeeds
 * only if every check passed; failures are logged and make insmod fail with EIO.
 */
#include <linux/bvec.h>
#include <linux/highmem.h>
#include <linux/in.h>
#include <linux/module.h>
#include <linux/net.h>
#include <linux/slab.h>
#include <linux/uio.h>
#include <net/net_namespace.h>
#include <net/sock.h>

static int family = 27;
module_param(family, int, 0444);
MODULE_PARM_DESC(family, "AF_SCI family number (/sys/module/af_sci/parameters/family)");

#define KVEC_BYTES	(4 << 20)
#define CHUNK		(48 * 1024 + 7)	/* odd size: chunks straddle pages */
#define BVEC_PAGES	16

static int checks, failures;

#define CHECK(cond, fmt, ...) do {						\
	checks++;								\
	if (!(cond)) {								\
		failures++;							\
		pr_err("sci_kselftest: FAIL %s:%d: " fmt "\n", __func__, __LINE__, ##__VA_ARGS__); \
	}									\
} while (0)

static u8 pattern(size_t off)
{
	return (u8)(off * 131 + (off >> 9) * 7 + 3);
}

/* kvec: 4 MiB in odd-sized chunks, each sent with kernel_sendmsg, read back with MSG_WAITALL. */
static void test_kvec(struct socket *tx, struct socket *rx)
{
	u8 *out = kmalloc(CHUNK, GFP_KERNEL), *in = kmalloc(CHUNK, GFP_KERNEL);
	size_t off = 0, i;

	if (!out || !in) {
		CHECK(0, "out of memory");
		goto out;
	}
	while (off < KVEC_BYTES) {
		size_t len = min_t(size_t, CHUNK, KVEC_BYTES - off);
		struct msghdr msg = { .msg_flags = MSG_NOSIGNAL };
		struct kvec vec = { .iov_base = out, .iov_len = len };
		int ret;

		for (i = 0; i < len; i++)
			out[i] = pattern(off + i);
		ret = kernel_sendmsg(tx, &msg, &vec, 1, len);
		if (ret != len) {
			CHECK(0, "kernel_sendmsg at %zu returned %d, want %zu", off, ret, len);
			goto out;
		}
		memset(in, 0, len);
		vec.iov_base = in;
		ret = kernel_recvmsg(rx, &msg, &vec, 1, len, MSG_WAITALL);
		if (ret != len) {
			CHECK(0, "kernel_recvmsg at %zu returned %d, want %zu", off, ret, len);
			goto out;
		}
		if (memcmp(in, out, len)) {
			CHECK(0, "kvec data differs in the chunk at %zu", off);
			goto out;
		}
		off += len;
	}
	CHECK(off == KVEC_BYTES, "kvec transfer stopped at %zu", off);
out:
	kfree(out);
	kfree(in);
}

/* bvec: pages sent with sock_sendmsg, received into other pages with sock_recvmsg. */
static void test_bvec(struct socket *tx, struct socket *rx)
{
	struct page *out[BVEC_PAGES] = {}, *in[BVEC_PAGES] = {};
	struct bio_vec bv[BVEC_PAGES];
	size_t len = BVEC_PAGES * PAGE_SIZE - 100, i;
	struct msghdr msg = { .msg_flags = MSG_NOSIGNAL };
	int ret, p;

	for (p = 0; p < BVEC_PAGES; p++) {
		out[p] = alloc_page(GFP_KERNEL);
		in[p] = alloc_page(GFP_KERNEL | __GFP_ZERO);
		if (!out[p] || !in[p]) {
			CHECK(0, "out of memory");
			goto out;
		}
		for (i = 0; i < PAGE_SIZE; i++)
			((u8 *)page_address(out[p]))[i] = pattern(p * PAGE_SIZE + i);
		bvec_set_page(&bv[p], out[p], PAGE_SIZE, 0);
	}
	bv[BVEC_PAGES - 1].bv_len -= 100;
	iov_iter_bvec(&msg.msg_iter, ITER_SOURCE, bv, BVEC_PAGES, len);
	ret = sock_sendmsg(tx, &msg);
	CHECK(ret == len, "sock_sendmsg(bvec) returned %d, want %zu", ret, len);

	for (p = 0; p < BVEC_PAGES; p++)
		bvec_set_page(&bv[p], in[p], PAGE_SIZE, 0);
	bv[BVEC_PAGES - 1].bv_len -= 100;
	msg = (struct msghdr){};
	iov_iter_bvec(&msg.msg_iter, ITER_DEST, bv, BVEC_PAGES, len);
	ret = sock_recvmsg(rx, &msg, MSG_WAITALL);
	CHECK(ret == len, "sock_recvmsg(bvec) returned %d, want %zu", ret, len);
	for (p = 0; p < BVEC_PAGES && ret == len; p++) {
		size_t n = p == BVEC_PAGES - 1 ? PAGE_SIZE - 100 : PAGE_SIZE;

		if (memcmp(page_address(in[p]), page_address(out[p]), n)) {
			CHECK(0, "bvec data differs in page %d", p);
			break;
		}
	}
out:
	for (p = 0; p < BVEC_PAGES; p++) {
		if (out[p])
			__free_page(out[p]);
		if (in[p])
			__free_page(in[p]);
	}
}

static void test_shutdown(struct socket *tx, struct socket *rx)
{
	struct msghdr msg = {};
	struct kvec vec;
	u8 byte;
	int ret;

	ret = kernel_sock_shutdown(tx, SHUT_WR);
	CHECK(ret == 0, "kernel_sock_shutdown returned %d", ret);
	vec = (struct kvec){ .iov_base = &byte, .iov_len = 1 };
	ret = kernel_recvmsg(rx, &msg, &vec, 1, 1, 0);
	CHECK(ret == 0, "recv after the peer's SHUT_WR returned %d, want 0 (EOF)", ret);
}

static int __init sci_kselftest_init(void)
{
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct socket *lsock = NULL, *tx = NULL, *rx = NULL;
	int ret;

	ret = sock_create_kern(&init_net, family, SOCK_STREAM, IPPROTO_TCP, &lsock);
	CHECK(ret == 0, "sock_create_kern(family %d) returned %d", family, ret);
	if (ret)
		goto out;
	CHECK(lsock->sk->sk_family == family, "listener sk_family %d", lsock->sk->sk_family);
	ret = kernel_bind(lsock, (struct sockaddr *)&addr, sizeof(addr));
	CHECK(ret == 0, "kernel_bind returned %d", ret);
	ret = kernel_listen(lsock, 8);
	CHECK(ret == 0, "kernel_listen returned %d", ret);
	ret = kernel_getsockname(lsock, (struct sockaddr *)&addr);
	CHECK(ret == sizeof(addr) && addr.sin_port, "kernel_getsockname returned %d, port %u",
	      ret, ntohs(addr.sin_port));
	if (failures)
		goto out;

	ret = sock_create_kern(&init_net, family, SOCK_STREAM, 0, &tx);
	CHECK(ret == 0, "sock_create_kern(client) returned %d", ret);
	if (ret)
		goto out;
	ret = kernel_connect(tx, (struct sockaddr *)&addr, sizeof(addr), 0);
	CHECK(ret == 0, "kernel_connect returned %d", ret);
	ret = kernel_accept(lsock, &rx, 0);
	CHECK(ret == 0, "kernel_accept returned %d", ret);
	if (failures)
		goto out;
	CHECK(rx->sk->sk_family == family && rx->ops->family == family,
	      "the accepted socket is not AF_SCI (sk_family %d)", rx->sk->sk_family);

	test_kvec(tx, rx);
	test_kvec(rx, tx);
	test_bvec(tx, rx);
	test_bvec(rx, tx);
	test_shutdown(tx, rx);
out:
	if (rx)
		sock_release(rx);
	if (tx)
		sock_release(tx);
	if (lsock)
		sock_release(lsock);
	if (failures) {
		pr_err("sci_kselftest: %d of %d checks failed\n", failures, checks);
		return -EIO;
	}
	pr_info("sci_kselftest: all %d checks passed\n", checks);
	return 0;
}

static void __exit sci_kselftest_exit(void)
{
}

module_init(sci_kselftest_init);
module_exit(sci_kselftest_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Kernel-user test of AF_SCI sockets (kvec/bvec, kernel_* calls)");
