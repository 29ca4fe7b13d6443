/* SPDX-License-Identifier: GPL-2.0 */
/* sock_semantics: the test entry points, by file; the table is in main.c. */
#ifndef SOCK_SEMANTICS_TESTS_H
#define SOCK_SEMANTICS_TESTS_H

/* transfer.c */
void t_echo_v4(void);
void t_echo_v6(void);
void t_large_transfer(void);
void t_splice(void);
void t_splice_faulted_write(void);
void t_msg_zerocopy(void);

/* connect.c */
void t_nonblock_connect(void);
void t_nonblock_connect_refused(void);
void t_connect_refused(void);
void t_connect_twice(void);

/* readiness.c */
void t_poll_readiness(void);
void t_poll_listen(void);
void t_epoll_level(void);
void t_epoll_edge(void);
void t_epoll_rdhup(void);
void t_epoll_edge_partial(void);
void t_epoll_edge_space(void);
void t_epoll_hangup_only(void);
void t_select(void);

/* recv_flags.c */
void t_msg_peek(void);
void t_msg_waitall(void);
void t_msg_dontwait(void);
void t_so_rcvlowat(void);
void t_tcp_inq(void);
void t_so_timestamp_stream(void);
void t_so_peek_off(void);
void t_recv_zero_len(void);
void t_nonblock_recv_accept(void);
void t_so_rcvtimeo(void);
void t_so_sndtimeo(void);
void t_fionread_siocoutq(void);

/* shutdown_close.c */
void t_shutdown_wr(void);
void t_shutdown_rd(void);
void t_sigpipe_after_close(void);
void t_sigpipe_after_reset(void);
void t_msg_nosignal(void);
void t_peer_close_eof(void);
void t_peer_reset(void);
void t_close_unread_rst(void);

/* addresses.c */
void t_names_v4(void);
void t_names_v6(void);
void t_names_truncated(void);
void t_v6_dualstack(void);

/* options.c */
void t_sockopt_tcp(void);
void t_sockopt_tcp_info(void);
void t_sockopt_keepalive(void);
void t_sockopt_socket(void);
void t_accept_inherits_options(void);

/* process.c */
void t_fork_inherit(void);
void t_dup(void);
void t_many_concurrent(void);
void t_mixed_tcp_client(void);
void t_mixed_tcp_server(void);

/* bind_listen.c */
void t_reuseaddr_rebind(void);
void t_bind_eaddrinuse(void);
void t_listen_backlog_order(void);
void t_listen_autobind(void);
void t_shutdown_listener(void);

/* bad_input.c */
void t_bad_addrlen_bind(void);
void t_bad_addrlen_connect(void);
void t_bad_family(void);
void t_connect_af_unspec(void);
void t_efault_send_recv(void);
void t_efault_msg(void);
void t_efault_addr(void);
void t_bad_getsockopt(void);
void t_bad_setsockopt(void);
void t_accept_not_listening(void);
void t_listen_connected(void);
void t_send_recv_unconnected(void);
void t_sendto_connected(void);
void t_recv_oob_no_urgent(void);
void t_shutdown_bad(void);

/* dgram.c */
void t_dgram_echo_v4(void);
void t_dgram_echo_v6(void);
void t_dgram_boundaries(void);
void t_dgram_trunc(void);
void t_dgram_peek(void);
void t_dgram_dontwait(void);
void t_dgram_rcvtimeo(void);
void t_dgram_connected(void);
void t_dgram_disconnect(void);
void t_dgram_unconnected_send(void);
void t_dgram_refused(void);
void t_dgram_zero_len(void);
void t_dgram_largest_v4(void);
void t_dgram_largest_v6(void);
void t_dgram_mmsg(void);
void t_dgram_fionread(void);
void t_dgram_pktinfo_v4(void);
void t_dgram_pktinfo_v6(void);
void t_dgram_timestamp(void);
void t_dgram_rcvbuf_drops(void);
void t_dgram_poll(void);
void t_dgram_epoll_level(void);
void t_dgram_epoll_edge(void);
void t_dgram_names(void);
void t_dgram_bind_inuse(void);
void t_dgram_v6_dualstack(void);
void t_dgram_no_listen_accept(void);
void t_dgram_shutdown(void);
void t_dgram_sockopts(void);
void t_dgram_broadcast_eacces(void);
void t_dgram_bad_input(void);
void t_dgram_fork(void);
void t_dgram_plain_peer(void);
void t_dgram_many(void);
void t_dgram_peek_off(void);
void t_dgram_fabric_path(void);
void t_dgram_fabric_unread(void);
void t_dgram_fabric_rebind(void);
void t_dgram_fabric_blocking(void);
void t_dgram_fabric_epoll_edge(void);
void t_dgram_fabric_epoll_end(void);
void t_dgram_fabric_cmsg_later(void);
void t_dgram_fabric_pktinfo_v4(void);
void t_dgram_fabric_pktinfo_v6(void);
void t_dgram_fabric_pktinfo_mapped(void);
void t_dgram_fabric_rcvbuf_drops(void);
void t_sci_spin_wakeup(void);
void t_dgram_fabric_connect_queued(void);
void t_dgram_fabric_cmsg_later_drops(void);
void t_dgram_tos_v4(void);
void t_dgram_tclass_v6(void);
void t_dgram_segment_v4(void);
void t_dgram_segment_v6(void);
void t_dgram_fabric_tos_v4(void);
void t_dgram_fabric_tclass_v6(void);
void t_dgram_fabric_segment_v4(void);
void t_dgram_fabric_segment_v6(void);
void t_dgram_dontfrag_v4(void);
void t_dgram_dontfrag_v6(void);
void t_dgram_fabric_dontfrag_v4(void);
void t_dgram_fabric_dontfrag_v6(void);
void t_dgram_fabric_gro(void);
void t_sci_dgram_idle(void);
void t_sci_dgram_opt_out(void);

/* sci_only.c */
void t_sci_types(void);
void t_sci_protocols(void);
void t_sci_info_short(void);
void t_sci_info_set(void);
void t_sci_fallback_handover(void);

/* uring.c */
void t_uring_stream(void);
void t_uring_connect_refused(void);
void t_uring_poll(void);
void t_uring_recv_nonempty(void);
void t_uring_dgram(void);
void t_uring_send_zc(void);

#endif /* SOCK_SEMANTICS_TESTS_H */
