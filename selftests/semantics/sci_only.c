// SPDX-License-Identifier: GPL-2.0
/*
 * sock_semantics: AF_SCI only (run only when the sockets under test are AF_SCI).
 */
#include "harness.h"
#include "tests.h"

void t_sci_dgram(void)
{
	EXPECT_ERR(syscall(SYS_socket, g_sci_family, SOCK_DGRAM, 0), ESOCKTNOSUPPORT);
	EXPECT_ERR(syscall(SYS_socket, g_sci_family, SOCK_SEQPACKET, 0), ESOCKTNOSUPPORT);
}

void t_sci_udp_proto(void)
{
	int fd;

	EXPECT_ERR(syscall(SYS_socket, g_sci_family, SOCK_STREAM, IPPROTO_UDP), EPROTONOSUPPORT);
	fd = (int)syscall(SYS_socket, g_sci_family, SOCK_STREAM, IPPROTO_TCP);
	CHECK(fd >= 0, "socket(F, SOCK_STREAM, IPPROTO_TCP): %s", ename(errno));
	EXPECT_EQ(getint(fd, SOL_SOCKET, SO_PROTOCOL), IPPROTO_TCP);
	close(fd);
}

void t_sci_info_short(void)
{
	struct sci_info info[2];
	socklen_t len = sizeof(info[0]) - 1;
	int fd = ut_socket(AF_INET);

	EXPECT_ERR(getsockopt(fd, SOL_SCI, SCI_INFO, info, &len), EINVAL);
	len = 0;
	EXPECT_ERR(getsockopt(fd, SOL_SCI, SCI_INFO, info, &len), EINVAL);
	/* A longer buffer gets exactly the structure. */
	len = sizeof(info);
	SYS(getsockopt(fd, SOL_SCI, SCI_INFO, info, &len));
	EXPECT_EQ(len, sizeof(info[0]));
	EXPECT_EQ(info[0].state, TCP_CLOSE);
	close(fd);
}

void t_sci_info_set(void)
{
	struct sci_info info = { 0 };
	int fd = ut_socket(AF_INET);

	EXPECT_ERR(setsockopt(fd, SOL_SCI, SCI_INFO, &info, sizeof(info)), ENOPROTOOPT);
	close(fd);
}
