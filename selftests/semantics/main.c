// SPDX-License-Identifier: GPL-2.0
/*
 * sock_semantics: socket semantics suite for AF_SCI (stream and datagram sockets).
 *
 * Every assertion states what Linux TCP does; run with --family inet on a plain
 * kernel to see them all pass against TCP itself.  With --family sci the sockets
 * under test are AF_SCI sockets (family number read from AF_SCI_FAMILY_PATH);
 * with --family inet under an LD_PRELOAD shim that rewrites AF_INET stream
 * sockets, set SCI_EXPECT_SCI=1 so that every socket is checked to really be
 * AF_SCI.
 *
 * Each test runs in its own forked child (own process group) with an alarm()
 * timeout.  Output is TAP-like: "ok N - name", "not ok N - name: reason".
 *
 * The framework is in harness.c, the tests in one file per topic; this file
 * holds the test table.  Keep its order: fixed ports derive from the table
 * index, and result names are compared across runs.
 */
#include "harness.h"
#include "tests.h"

/* ------------------------------------------------------------------------- */
/* Test table                                                                 */

static const struct test tests[] = {
	{ "echo_v4", t_echo_v4, 0, false },
	{ "echo_v6", t_echo_v6, 0, false },
	{ "large_transfer_bidir", t_large_transfer, 240, false },
	{ "nonblock_connect", t_nonblock_connect, 0, false },
	{ "nonblock_connect_refused", t_nonblock_connect_refused, 0, false },
	{ "connect_refused", t_connect_refused, 0, false },
	{ "connect_twice_eisconn", t_connect_twice, 0, false },
	{ "poll_readiness", t_poll_readiness, 0, false },
	{ "poll_listen_pending", t_poll_listen, 0, false },
	{ "epoll_level", t_epoll_level, 0, false },
	{ "epoll_edge", t_epoll_edge, 0, false },
	{ "epoll_rdhup", t_epoll_rdhup, 0, false },
	{ "epoll_edge_partial", t_epoll_edge_partial, 0, false },
	{ "epoll_edge_space", t_epoll_edge_space, 0, false },
	{ "select_readiness", t_select, 0, false },
	{ "shutdown_wr", t_shutdown_wr, 0, false },
	{ "shutdown_rd", t_shutdown_rd, 0, false },
	{ "msg_peek", t_msg_peek, 0, false },
	{ "msg_waitall", t_msg_waitall, 0, false },
	{ "msg_dontwait", t_msg_dontwait, 0, false },
	{ "recv_zero_len", t_recv_zero_len, 0, false },
	{ "nonblock_recv_accept", t_nonblock_recv_accept, 0, false },
	{ "so_rcvtimeo", t_so_rcvtimeo, 0, false },
	{ "so_sndtimeo", t_so_sndtimeo, 0, false },
	{ "sigpipe_after_close", t_sigpipe_after_close, 0, false },
	{ "sigpipe_after_reset", t_sigpipe_after_reset, 0, false },
	{ "msg_nosignal", t_msg_nosignal, 0, false },
	{ "fionread_siocoutq", t_fionread_siocoutq, 0, false },
	{ "peer_close_eof", t_peer_close_eof, 0, false },
	{ "peer_reset_econnreset", t_peer_reset, 0, false },
	{ "close_unread_rst", t_close_unread_rst, 0, false },
	{ "names_v4", t_names_v4, 0, false },
	{ "names_v6", t_names_v6, 0, false },
	{ "names_truncated", t_names_truncated, 0, false },
	{ "v6_dualstack_v4_client", t_v6_dualstack, 0, false },
	{ "sockopt_tcp", t_sockopt_tcp, 0, false },
	{ "sockopt_tcp_info", t_sockopt_tcp_info, 0, false },
	{ "sockopt_keepalive", t_sockopt_keepalive, 0, false },
	{ "sockopt_socket", t_sockopt_socket, 0, false },
	{ "fork_inherit", t_fork_inherit, 0, false },
	{ "dup_after_close", t_dup, 0, false },
	{ "many_concurrent", t_many_concurrent, 60, false },
	{ "mixed_tcp_client", t_mixed_tcp_client, 0, false },
	{ "mixed_tcp_server", t_mixed_tcp_server, 0, false },
	{ "reuseaddr_rebind", t_reuseaddr_rebind, 0, false },
	{ "bind_eaddrinuse", t_bind_eaddrinuse, 0, false },
	{ "listen_backlog_order", t_listen_backlog_order, 0, false },
	{ "listen_autobind", t_listen_autobind, 0, false },
	{ "shutdown_listener", t_shutdown_listener, 0, false },
	{ "bad_addrlen_bind", t_bad_addrlen_bind, 0, false },
	{ "bad_addrlen_connect", t_bad_addrlen_connect, 0, false },
	{ "bad_family", t_bad_family, 0, false },
	{ "connect_af_unspec", t_connect_af_unspec, 0, false },
	{ "efault_send_recv", t_efault_send_recv, 0, false },
	{ "efault_sendmsg_recvmsg", t_efault_msg, 0, false },
	{ "efault_addr_ptrs", t_efault_addr, 0, false },
	{ "bad_getsockopt", t_bad_getsockopt, 0, false },
	{ "bad_setsockopt", t_bad_setsockopt, 0, false },
	{ "accept_not_listening", t_accept_not_listening, 0, false },
	{ "listen_connected", t_listen_connected, 0, false },
	{ "send_recv_unconnected", t_send_recv_unconnected, 0, false },
	{ "sendto_connected", t_sendto_connected, 0, false },
	{ "recv_oob_no_urgent", t_recv_oob_no_urgent, 0, false },
	{ "shutdown_bad", t_shutdown_bad, 0, false },
	{ "sci_types", t_sci_types, 0, true },
	{ "sci_protocols", t_sci_protocols, 0, true },
	{ "sci_info_short_optlen", t_sci_info_short, 0, true },
	{ "sci_info_set_enoprotoopt", t_sci_info_set, 0, true },
	{ "sci_fallback_handover", t_sci_fallback_handover, 0, true },
	{ "sci_dgram_idle", t_sci_dgram_idle, 0, true },
	{ "sci_dgram_opt_out", t_sci_dgram_opt_out, 0, true },
	{ "splice_socket_pipe", t_splice, 0, false },
	{ "dgram_echo_v4", t_dgram_echo_v4, 0, false },
	{ "dgram_echo_v6", t_dgram_echo_v6, 0, false },
	{ "dgram_boundaries", t_dgram_boundaries, 0, false },
	{ "dgram_trunc", t_dgram_trunc, 0, false },
	{ "dgram_peek", t_dgram_peek, 0, false },
	{ "dgram_dontwait", t_dgram_dontwait, 0, false },
	{ "dgram_rcvtimeo", t_dgram_rcvtimeo, 0, false },
	{ "dgram_connected", t_dgram_connected, 0, false },
	{ "dgram_disconnect", t_dgram_disconnect, 0, false },
	{ "dgram_unconnected_send", t_dgram_unconnected_send, 0, false },
	{ "dgram_refused", t_dgram_refused, 0, false },
	{ "dgram_zero_len", t_dgram_zero_len, 0, false },
	{ "dgram_largest_v4", t_dgram_largest_v4, 0, false },
	{ "dgram_largest_v6", t_dgram_largest_v6, 0, false },
	{ "dgram_mmsg", t_dgram_mmsg, 0, false },
	{ "dgram_fionread", t_dgram_fionread, 0, false },
	{ "dgram_pktinfo_v4", t_dgram_pktinfo_v4, 0, false },
	{ "dgram_pktinfo_v6", t_dgram_pktinfo_v6, 0, false },
	{ "dgram_timestamp", t_dgram_timestamp, 0, false },
	{ "dgram_rcvbuf_drops", t_dgram_rcvbuf_drops, 0, false },
	{ "dgram_poll", t_dgram_poll, 0, false },
	{ "dgram_epoll_level", t_dgram_epoll_level, 0, false },
	{ "dgram_epoll_edge", t_dgram_epoll_edge, 0, false },
	{ "dgram_names", t_dgram_names, 0, false },
	{ "dgram_bind_inuse", t_dgram_bind_inuse, 0, false },
	{ "dgram_v6_dualstack", t_dgram_v6_dualstack, 0, false },
	{ "dgram_no_listen_accept", t_dgram_no_listen_accept, 0, false },
	{ "dgram_shutdown", t_dgram_shutdown, 0, false },
	{ "dgram_sockopts", t_dgram_sockopts, 0, false },
	{ "dgram_broadcast_eacces", t_dgram_broadcast_eacces, 0, false },
	{ "dgram_bad_input", t_dgram_bad_input, 0, false },
	{ "dgram_fork", t_dgram_fork, 0, false },
	{ "dgram_plain_peer", t_dgram_plain_peer, 0, false },
	{ "dgram_many", t_dgram_many, 0, false },
	{ "dgram_peek_off", t_dgram_peek_off, 0, false },
	{ "dgram_fabric_path", t_dgram_fabric_path, 0, false },
	{ "dgram_fabric_unread", t_dgram_fabric_unread, 0, false },
	{ "dgram_fabric_rebind", t_dgram_fabric_rebind, 0, false },
	{ "dgram_fabric_blocking", t_dgram_fabric_blocking, 0, false },
	{ "dgram_fabric_epoll_edge", t_dgram_fabric_epoll_edge, 0, false },
	{ "dgram_fabric_epoll_end", t_dgram_fabric_epoll_end, 0, false },
	{ "dgram_fabric_cmsg_later", t_dgram_fabric_cmsg_later, 0, false },
	{ "splice_faulted_pipe_write", t_splice_faulted_write, 0, false },
	{ "dgram_fabric_pktinfo_v4", t_dgram_fabric_pktinfo_v4, 0, false },
	{ "dgram_fabric_pktinfo_v6", t_dgram_fabric_pktinfo_v6, 0, false },
	{ "dgram_fabric_pktinfo_mapped", t_dgram_fabric_pktinfo_mapped, 0, false },
	{ "dgram_fabric_rcvbuf_drops", t_dgram_fabric_rcvbuf_drops, 0, false },
	{ "sci_spin_wakeup", t_sci_spin_wakeup, 0, true },
	{ "dgram_fabric_connect_queued", t_dgram_fabric_connect_queued, 0, false },
	{ "dgram_fabric_cmsg_later_drops", t_dgram_fabric_cmsg_later_drops, 0, false },
	{ "dgram_tos_v4", t_dgram_tos_v4, 0, false },
	{ "dgram_tclass_v6", t_dgram_tclass_v6, 0, false },
	{ "dgram_segment_v4", t_dgram_segment_v4, 0, false },
	{ "dgram_segment_v6", t_dgram_segment_v6, 0, false },
	{ "dgram_fabric_tos_v4", t_dgram_fabric_tos_v4, 0, false },
	{ "dgram_fabric_tclass_v6", t_dgram_fabric_tclass_v6, 0, false },
	{ "dgram_fabric_segment_v4", t_dgram_fabric_segment_v4, 0, false },
	{ "dgram_fabric_segment_v6", t_dgram_fabric_segment_v6, 0, false },
	{ "dgram_dontfrag_v4", t_dgram_dontfrag_v4, 0, false },
	{ "dgram_dontfrag_v6", t_dgram_dontfrag_v6, 0, false },
	{ "dgram_fabric_dontfrag_v4", t_dgram_fabric_dontfrag_v4, 0, false },
	{ "dgram_fabric_dontfrag_v6", t_dgram_fabric_dontfrag_v6, 0, false },
	{ "dgram_fabric_gro", t_dgram_fabric_gro, 0, false },
	{ "uring_stream", t_uring_stream, 120, false },
	{ "uring_connect_refused", t_uring_connect_refused, 0, false },
	{ "uring_poll", t_uring_poll, 0, false },
	{ "uring_dgram", t_uring_dgram, 0, false },
	{ "epoll_hangup_only", t_epoll_hangup_only, 0, false },
	/* TABLE-END */
};

#define NTESTS (int)(sizeof(tests) / sizeof(tests[0]))

int main(int argc, char **argv)
{
	return harness_main(argc, argv, tests, NTESTS);
}
