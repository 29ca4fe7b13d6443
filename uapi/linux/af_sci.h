/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * af_sci: user-space API of the AF_SCI socket family.
 *
 * AF_SCI stream sockets take and return struct sockaddr_in / sockaddr_in6 and behave
 * like TCP sockets.  The family number is chosen when the module is loaded (module
 * parameter "family"); programs read it from /sys/module/af_sci/parameters/family and
 * use AF_SCI_DEFAULT only when that file is missing.
 */
#ifndef _UAPI_LINUX_AF_SCI_H
#define _UAPI_LINUX_AF_SCI_H

#include <linux/types.h>

/* Default family number (the number SCI SOCKET used; unused by Linux 6.12). */
#define AF_SCI_DEFAULT		27
#define PF_SCI_DEFAULT		AF_SCI_DEFAULT

/* Where the family number of the loaded module can be read. */
#define AF_SCI_FAMILY_PATH	"/sys/module/af_sci/parameters/family"

/* Socket option level of AF_SCI's own options (get/setsockopt). */
#define SOL_SCI			300	/* above every SOL_* of Linux 6.12 (SOL_VSOCK = 287) */

/* getsockopt(fd, SOL_SCI, SCI_INFO, &info, &len): struct sci_info. Read-only. */
#define SCI_INFO		1

/*
 * SCI_NATIVE_FAMILY (int): AF_INET or AF_INET6, the family of the socket's native TCP
 * socket and so of the addresses it takes and returns.  A new AF_SCI socket is AF_INET
 * until its first IPv6 address (bind/connect); setting this option before the first
 * bind, connect or listen settles it explicitly (the preload sets it for programs that
 * asked for AF_INET6).  The family changes at most once (a second change fails with
 * EINVAL), and not after the first bind, connect or listen (EISCONN).
 */
#define SCI_NATIVE_FAMILY	2

/* How a socket carries its bytes (sci_info.mode). */
enum sci_mode {
	SCI_MODE_NATIVE	= 0,	/* over its own native TCP socket (fallback) */
	SCI_MODE_SCI	= 1,	/* over shared-memory message queues */
};

/* Why a socket is SCI_MODE_NATIVE (sci_info.fallback_reason). */
enum sci_fallback_reason {
	SCI_FALLBACK_NONE	= 0,	/* not fallen back (SCI_MODE_SCI) */
	SCI_FALLBACK_NO_FABRIC	= 1,	/* no SCI data path is available to this socket */
};

/* States reported in sci_info.state: the TCP states of linux/tcp.h (TCP_ESTABLISHED = 1, ...). */

struct sci_info {
	__u32	mode;		/* enum sci_mode */
	__u32	fallback_reason;	/* enum sci_fallback_reason */
	__u32	native_family;	/* AF_INET or AF_INET6: family of the native socket */
	__u32	state;		/* TCP state of the connection (native socket's sk_state) */
};

#endif /* _UAPI_LINUX_AF_SCI_H */
