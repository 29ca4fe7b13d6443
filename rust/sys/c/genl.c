// SPDX-License-Identifier: GPL-2.0
/*
 * af_sci C helpers, generic netlink: the generic netlink family's tables and policies,
 * the per-netns counters' pernet_operations, and wrappers of static inline helpers.  No
 * logic lives here; the handlers are Rust (see genl.h).
 */
#include <linux/inetdevice.h>
#include <linux/percpu.h>
#include <linux/sock_diag.h>
#include <net/addrconf.h>
#include <net/ip6_route.h>
#include <net/netns/generic.h>
#include <net/route.h>
#include "genl.h"

static const struct nla_policy sci_node_policy[SCI_NODE_A_MAX + 1] = {
	[SCI_NODE_A_ADDR4]	= { .type = NLA_BE32 },
	[SCI_NODE_A_ADDR6]	= NLA_POLICY_EXACT_LEN(sizeof(struct in6_addr)),
	[SCI_NODE_A_ID]		= { .type = NLA_U32 },
	[SCI_NODE_A_SOURCE]	= NLA_POLICY_MAX(NLA_U8, SCI_NODE_SOURCE_FABRIC),
};

static const struct nla_policy sci_port_policy[SCI_PORT_A_MAX + 1] = {
	[SCI_PORT_A_ACTION]	= NLA_POLICY_RANGE(NLA_U8, SCI_PORT_INCLUDE, SCI_PORT_EXCLUDE),
	[SCI_PORT_A_LOW]	= NLA_POLICY_MIN(NLA_U16, 1),
	[SCI_PORT_A_HIGH]	= NLA_POLICY_MIN(NLA_U16, 1),
};

/* SCI_A_SOCK and SCI_A_STATS appear in replies only: requests carrying them are refused. */
static const struct nla_policy sci_policy[SCI_A_MAX + 1] = {
	[SCI_A_NODE]		= NLA_POLICY_NESTED(sci_node_policy),
	[SCI_A_PORT_RULE]	= NLA_POLICY_NESTED(sci_port_policy),
	[SCI_A_PUBLISH]		= NLA_POLICY_MAX(NLA_U8, 1),
};

/* doit/dumpit are filled in from the Rust handlers by sci_genl_register(). */
static struct genl_small_ops sci_genl_ops[] = {
	{ .cmd = SCI_CMD_NODE_GET },
	{ .cmd = SCI_CMD_NODE_SET, .flags = GENL_ADMIN_PERM },
	{ .cmd = SCI_CMD_PORT_GET },
	{ .cmd = SCI_CMD_PORT_SET, .flags = GENL_ADMIN_PERM },
	{ .cmd = SCI_CMD_SOCK_GET },
	{ .cmd = SCI_CMD_STATS_GET },
	{ .cmd = SCI_CMD_LINK_DROP, .flags = GENL_ADMIN_PERM },
	{ .cmd = SCI_CMD_PUBLISH_SET, .flags = GENL_ADMIN_PERM },
};

static struct genl_family sci_genl_family = {
	.name		= SCI_GENL_NAME,
	.version	= SCI_GENL_VERSION,
	.maxattr	= SCI_A_MAX,
	.policy		= sci_policy,
	.netnsok	= true,
	.module		= THIS_MODULE,
	.small_ops	= sci_genl_ops,
	.n_small_ops	= ARRAY_SIZE(sci_genl_ops),
	.resv_start_op	= SCI_CMD_MAX + 1,	/* strict validation of every command */
};

int sci_genl_register(const struct sci_genl_handlers *h)
{
	struct genl_small_ops *op;

	for (op = sci_genl_ops; op < sci_genl_ops + ARRAY_SIZE(sci_genl_ops); op++) {
		switch (op->cmd) {
		case SCI_CMD_NODE_GET:	op->dumpit = h->node_dump; break;
		case SCI_CMD_NODE_SET:	op->doit = h->node_set; break;
		case SCI_CMD_PORT_GET:	op->dumpit = h->port_dump; break;
		case SCI_CMD_PORT_SET:	op->doit = h->port_set; break;
		case SCI_CMD_SOCK_GET:	op->dumpit = h->sock_dump; break;
		case SCI_CMD_STATS_GET:	op->doit = h->stats_get; break;
		case SCI_CMD_LINK_DROP:	op->doit = h->link_drop; break;
		case SCI_CMD_PUBLISH_SET: op->doit = h->publish_set; break;
		}
	}
	return genl_register_family(&sci_genl_family);
}

void sci_genl_unregister(void)
{
	genl_unregister_family(&sci_genl_family);
}

struct sk_buff *sci_genl_new(void) { return genlmsg_new(NLMSG_GOODSIZE, GFP_KERNEL); }
void sci_genl_free(struct sk_buff *skb) { nlmsg_free(skb); }

void *sci_genl_put_reply(struct sk_buff *skb, struct genl_info *info, u8 cmd)
{
	return genlmsg_put_reply(skb, info, &sci_genl_family, 0, cmd);
}

void *sci_genl_put_dump(struct sk_buff *skb, struct netlink_callback *cb, u8 cmd)
{
	return genlmsg_put(skb, NETLINK_CB(cb->skb).portid, cb->nlh->nlmsg_seq,
			   &sci_genl_family, NLM_F_MULTI, cmd);
}

void sci_genl_end(struct sk_buff *skb, void *hdr) { genlmsg_end(skb, hdr); }
void sci_genl_cancel(struct sk_buff *skb, void *hdr) { genlmsg_cancel(skb, hdr); }
int sci_genl_reply(struct sk_buff *skb, struct genl_info *info) { return genlmsg_reply(skb, info); }

struct nlattr *sci_nla_nest_start(struct sk_buff *skb, int type) { return nla_nest_start(skb, type); }
void sci_nla_nest_end(struct sk_buff *skb, struct nlattr *nest) { nla_nest_end(skb, nest); }
void sci_nla_nest_cancel(struct sk_buff *skb, struct nlattr *nest) { nla_nest_cancel(skb, nest); }
int sci_nla_put_u8(struct sk_buff *skb, int type, u8 value) { return nla_put_u8(skb, type, value); }
int sci_nla_put_u16(struct sk_buff *skb, int type, u16 value) { return nla_put_u16(skb, type, value); }
int sci_nla_put_u32(struct sk_buff *skb, int type, u32 value) { return nla_put_u32(skb, type, value); }

int sci_nla_put_u64(struct sk_buff *skb, int type, u64 value, int padtype)
{
	return nla_put_u64_64bit(skb, type, value, padtype);
}

static const struct nlattr *sci_nla_ok(const struct nlattr *nla, int *rem)
{
	return nla_ok(nla, *rem) ? nla : NULL;
}

const struct nlattr *sci_genl_first_attr(const struct genl_info *info, int *rem)
{
	*rem = genlmsg_len(info->genlhdr);
	return sci_nla_ok(genlmsg_data(info->genlhdr), rem);
}

const struct nlattr *sci_nla_first_nested(const struct nlattr *nla, int *rem)
{
	*rem = nla_len(nla);
	return sci_nla_ok(nla_data(nla), rem);
}

const struct nlattr *sci_nla_next(const struct nlattr *nla, int *rem)
{
	return sci_nla_ok(nla_next(nla, rem), rem);
}

int sci_nla_type(const struct nlattr *nla) { return nla_type(nla); }
int sci_nla_len(const struct nlattr *nla) { return nla_len(nla); }
const void *sci_nla_data(const struct nlattr *nla) { return nla_data(nla); }

/* NL_SET_ERR_MSG_ATTR, which wants a string literal. */
void sci_genl_set_err_msg(struct genl_info *info, const struct nlattr *nla, const char *msg)
{
	if (info->extack) {
		info->extack->_msg = msg;
		info->extack->bad_attr = nla;
	}
}

struct net *sci_genl_info_net(const struct genl_info *info) { return genl_info_net(info); }
struct net *sci_genl_cb_net(const struct netlink_callback *cb) { return sock_net(cb->skb->sk); }
long *sci_genl_cb_args(struct netlink_callback *cb) { return cb->args; }

static unsigned int sci_net_id;

static int sci_net_init(struct net *net)
{
	struct sci_net_stats *stats = net_generic(net, sci_net_id);

	stats->hot = alloc_percpu(struct sci_net_hot);
	return stats->hot ? 0 : -ENOMEM;
}

static void sci_net_exit(struct net *net)
{
	struct sci_net_stats *stats = net_generic(net, sci_net_id);

	free_percpu(stats->hot);
	stats->hot = NULL;
}

static struct pernet_operations sci_net_ops = {
	.init	= sci_net_init,
	.exit	= sci_net_exit,
	.id	= &sci_net_id,
	.size	= sizeof(struct sci_net_stats),
};

/* One call where a counter is bumped per datagram: the namespace and the bump. */
void sci_sk_hot_add(const struct sock *sk, unsigned int counter, u64 n)
{
	struct sci_net_stats *stats = net_generic(sock_net(sk), sci_net_id);

	if (counter < __SCI_HOT_MAX)
		this_cpu_add(stats->hot->v[counter], n);
}

u64 sci_net_hot_sum(struct sci_net_hot __percpu *hot, unsigned int counter)
{
	u64 sum = 0;
	int cpu;

	if (counter >= __SCI_HOT_MAX)
		return 0;
	for_each_possible_cpu(cpu)
		sum += READ_ONCE(per_cpu_ptr(hot, cpu)->v[counter]);
	return sum;
}

int sci_pernet_register(void)
{
	return register_pernet_subsys(&sci_net_ops);
}

void sci_pernet_unregister(void)
{
	unregister_pernet_subsys(&sci_net_ops);
}

void *sci_net_generic(const struct net *net)
{
	return net_generic(net, sci_net_id);
}

void *sci_sk_net_generic(const struct sock *sk)
{
	return net_generic(sock_net(sk), sci_net_id);
}

bool sci_addr4_is_local(struct net *net, __be32 addr)
{
	return inet_addr_type(net, addr) == RTN_LOCAL;
}

bool sci_addr6_is_local(struct net *net, const struct in6_addr *addr)
{
#if IS_ENABLED(CONFIG_IPV6)
	return ipv6_chk_addr(net, addr, NULL, 0);
#else
	return false;
#endif
}

/* sci_net_addrs() for one namespace; the caller holds rcu_read_lock(). */
static int sci_addrs_of(struct net *net, u8 *out, int max)
{
	struct net_device *dev;
	int n = 0;

	for_each_netdev_rcu(net, dev) {
		struct in_device *in_dev = __in_dev_get_rcu(dev);
		const struct in_ifaddr *ifa;

		if (!in_dev || (dev->flags & IFF_LOOPBACK))
			continue;
		in_dev_for_each_ifa_rcu(ifa, in_dev) {
			__be32 a = ifa->ifa_local;
			struct in6_addr mapped;

			if (n >= max)
				return n;
			if (ipv4_is_loopback(a) || ipv4_is_multicast(a) ||
			    ipv4_is_linklocal_169(a) || ipv4_is_zeronet(a))
				continue;
			ipv6_addr_set_v4mapped(a, &mapped);
			memcpy(out + 16 * n, &mapped, sizeof(mapped));
			n++;
		}
	}
#if IS_ENABLED(CONFIG_IPV6)
	for_each_netdev_rcu(net, dev) {
		struct inet6_dev *idev = __in6_dev_get(dev);
		const struct inet6_ifaddr *ifp;

		if (!idev || (dev->flags & IFF_LOOPBACK))
			continue;
		read_lock_bh(&idev->lock);
		list_for_each_entry(ifp, &idev->addr_list, if_list) {
			int type = ipv6_addr_type(&ifp->addr);

			if (n >= max)
				break;
			if ((type & (IPV6_ADDR_LOOPBACK | IPV6_ADDR_LINKLOCAL |
				     IPV6_ADDR_MULTICAST | IPV6_ADDR_MAPPED)) ||
			    type == IPV6_ADDR_ANY || (ifp->flags & IFA_F_TENTATIVE))
				continue;
			memcpy(out + 16 * n, &ifp->addr, sizeof(struct in6_addr));
			n++;
		}
		read_unlock_bh(&idev->lock);
		if (n >= max)
			break;
	}
#endif
	return n;
}

/*
 * The namespace whose cookie is cookie (0: the initial one), or NULL if it is gone.  The
 * caller holds rcu_read_lock(): a namespace stays on the list, whole, until a grace
 * period after cleanup_net() unlinked it, and its cookie is never reused.
 */
static struct net *sci_net_of_cookie(u64 cookie)
{
	struct net *net;

	if (!cookie)
		return &init_net;
	for_each_net_rcu(net)
		if (net->net_cookie == cookie)
			return net;
	return NULL;
}

int sci_net_addrs(u64 cookie, u8 *out, int max)
{
	struct net *net;
	int n = -ENOENT;

	rcu_read_lock();
	net = sci_net_of_cookie(cookie);
	if (net)
		n = sci_addrs_of(net, out, max);
	rcu_read_unlock();
	return n;
}

int sci_net_holds_addr(u64 cookie, const struct in6_addr *addr)
{
	struct net *net;
	int held = -ENOENT;

	rcu_read_lock();
	net = sci_net_of_cookie(cookie);
	if (net && ipv6_addr_v4mapped(addr))
		held = sci_addr4_is_local(net, addr->s6_addr32[3]);
	else if (net)
		held = sci_addr6_is_local(net, addr);
	rcu_read_unlock();
	return held;
}

int sci_route4_source(struct net *net, __be32 daddr, __be32 *saddr)
{
	struct flowi4 fl4 = { .daddr = daddr, .flowi4_proto = IPPROTO_TCP };
	struct rtable *rt = ip_route_output_key(net, &fl4);

	if (IS_ERR(rt))
		return PTR_ERR(rt);
	*saddr = fl4.saddr;
	ip_rt_put(rt);
	return 0;
}

int sci_route6_source(struct net *net, const struct in6_addr *daddr, struct in6_addr *saddr)
{
#if IS_ENABLED(CONFIG_IPV6)
	struct flowi6 fl6 = { .daddr = *daddr, .flowi6_proto = IPPROTO_TCP };
	struct dst_entry *dst;
	int err = ip6_dst_lookup(net, NULL, &dst, &fl6);

	if (err)
		return err;
	*saddr = fl6.saddr;
	dst_release(dst);
	return 0;
#else
	return -EAFNOSUPPORT;
#endif
}

/* Racy reads, as inet_diag reports sockets without their lock. */
void sci_sock_addrs(const struct sock *sk, struct sci_sock_addrs *out)
{
	memset(out, 0, sizeof(*out));
	out->family = READ_ONCE(sk->sk_family);
	out->local_port = READ_ONCE(sk->sk_num);
	out->peer_port = ntohs(READ_ONCE(sk->sk_dport));
#if IS_ENABLED(CONFIG_IPV6)
	if (out->family == AF_INET6) {
		memcpy(out->local, &sk->sk_v6_rcv_saddr, sizeof(struct in6_addr));
		memcpy(out->peer, &sk->sk_v6_daddr, sizeof(struct in6_addr));
		return;
	}
#endif
	memcpy(out->local, &sk->sk_rcv_saddr, sizeof(__be32));
	memcpy(out->peer, &sk->sk_daddr, sizeof(__be32));
}

u64 sci_sock_ino(struct sock *sk)
{
	return sock_i_ino(sk);
}

u64 sci_sock_cookie(struct sock *sk)
{
	u32 cookie[2];

	sock_diag_save_cookie(sk, cookie);
	return (u64)cookie[1] << 32 | cookie[0];
}
