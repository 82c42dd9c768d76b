// SPDX-License-Identifier: GPL-2.0
//
// FAST TCP as a BPF congestion control (struct_ops tcp_congestion_ops).
//
// FAST is delay-based. Once per round trip it moves the congestion window w
// towards the point where the flow keeps alpha packets queued in the path:
//
//	w <- min{ 2w, (1-gamma)*w + gamma*(baseRTT/RTT * w + alpha) }
//
// baseRTT is the smallest RTT sample the connection has seen, RTT the mean
// of the samples of the round that just ended. BPF has no floating point:
// gamma is a fraction in 1/1024ths, and the update is done in integers as
// written in fast_update below. internal/cc/fast (fast.go) is the same arithmetic
// in Go; its tests and the trace test check the two agree.
//
// Slow start: the window grows by the packets acknowledged (doubling per
// round) until a round's mean RTT shows the flow's queue: the backlog
// estimate w*(RTT-baseRTT)/RTT reaches alpha. Then FAST's update takes over.
//
// Loss: a loss while the flow's own queue is short (the last round's
// backlog estimate below alpha/2) is taken for random loss: the kernel
// repairs it, the window stays (and slow start goes on, if it was on).
// FAST's own signal is the queue; a buffer that overflows while the flow
// keeps less than alpha/2 queued is smaller than FAST was told to fill.
// A loss with the queue built up (backlog >= alpha/2) is congestion: the
// window is halved (ssthresh = max(w/2, 2), the kernel's recovery takes it
// there), once per round trip: a loss before the data outstanding at the
// last halving is acknowledged (a second loss of the same episode, or the
// timeout that ends it) keeps the threshold that halving set. Then the FAST
// update resumes once per round, growing at most twofold per round.
//
// Built by `make bpf` into internal/cc/fast_bpfel.o, which is committed.

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_endian.h>

char _license[] SEC("license") = "GPL";

#define GAMMA_SCALE 1024
#define MIN_CWND 2
#define TCP_INFINITE_SSTHRESH 0x7fffffff
#define TCP_CA_Loss 4

// Kernel types, only the members used; CO-RE relocates each access against
// the running kernel's BTF, so member order and offsets here do not matter.
struct sock_common {
	__be16 skc_dport;
	__u16 skc_num;
} __attribute__((preserve_access_index));

struct sock {
	struct sock_common __sk_common;
} __attribute__((preserve_access_index));

struct inet_connection_sock {
	__u64 icsk_ca_priv[13];
} __attribute__((preserve_access_index));

struct tcp_sock {
	__u32 snd_nxt;
	__u32 snd_una;
	__u32 snd_cwnd;
	__u32 snd_ssthresh;
	__u32 snd_cwnd_clamp;
	__u32 prior_cwnd;
} __attribute__((preserve_access_index));

struct ack_sample {
	__u32 pkts_acked;
	__s32 rtt_us;
	__u32 in_flight;
} __attribute__((preserve_access_index));

struct tcp_congestion_ops {
	void (*init)(struct sock *sk);
	__u32 (*ssthresh)(struct sock *sk);
	void (*cong_avoid)(struct sock *sk, __u32 ack, __u32 acked);
	void (*set_state)(struct sock *sk, __u8 new_state);
	void (*pkts_acked)(struct sock *sk, const struct ack_sample *sample);
	__u32 (*undo_cwnd)(struct sock *sk);
	char name[16];
} __attribute__((preserve_access_index));

// The parameters, one entry, pinned beside the registration so that
// `lightpath cc install fast --alpha N` can change them in place.
struct fast_params {
	__u32 alpha; // packets the flow keeps queued
	__u32 gamma; // 1..1024: the step towards the target, in 1/1024ths
	__u32 trace; // 1: write one fast_round per round to fast_trace
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fast_params);
} fast_params SEC(".maps");

// One round's decision, for tests and `lightpath cc trace`.
struct fast_round {
	__u64 time_ns;
	__u16 local_port;
	__u16 remote_port; // host order
	__u32 cwnd;        // before the decision
	__u32 base_rtt;    // microseconds
	__u32 avg_rtt;     // microseconds, the round's mean
	__u32 samples;
	__u32 next_cwnd; // after the decision
	__u32 ssthresh;  // after the decision
	__u32 alpha;
	__u32 gamma;
	__u32 phase;   // 0: FAST update, 1: slow start goes on, 2: slow start
	               // ends, 3: random loss (kept), 4: congestion loss (halved),
	               // 5: congestion loss of the episode already halved
	__u32 backlog; // the round's backlog estimate (a loss: the last round's)
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 18);
} fast_trace SEC(".maps");

// Per-connection state, in icsk_ca_priv (at most 104 bytes).
struct fast_ca {
	__u64 rtt_sum;     // microseconds, this round
	__u32 rtt_cnt;     // samples this round
	__u32 base_rtt;    // smallest sample seen, microseconds
	__u32 beg_snd_nxt; // the round ends when this is acknowledged
	__u32 backlog;     // the last round's backlog estimate, packets
	__u32 halved_at;   // snd_nxt at the last halving
	__u32 halved;      // 1 once the window has been halved
};

static __always_inline struct fast_ca *ca_of(struct sock *sk)
{
	return (struct fast_ca *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

static __always_inline int after(__u32 seq1, __u32 seq2)
{
	return (__s32)(seq2 - seq1) < 0;
}

// fast_update is FAST's window equation in integers. target is the window
// that would leave alpha packets queued at the round's RTT; the new window
// steps gamma/1024 of the way there, rounded to the nearest packet but at
// least one packet when the target is a packet or more away; never more
// than twice w, never below MIN_CWND. Go's fast.Update is the same.
static __always_inline __u32 fast_update(__u32 w, __u32 base, __u32 avg, __u32 alpha, __u32 gamma)
{
	__u64 target = (__u64)base * w / avg + alpha;
	__u64 next = ((__u64)(GAMMA_SCALE - gamma) * w + (__u64)gamma * target + GAMMA_SCALE / 2) / GAMMA_SCALE;

	if (next == w && target > w)
		next = w + 1;
	else if (next == w && target < w)
		next = w - 1;
	if (next > 2 * (__u64)w)
		next = 2 * (__u64)w;
	if (next < MIN_CWND)
		next = MIN_CWND;
	return next;
}

// backlog is the packets the flow keeps queued by the round's estimate.
static __always_inline __u32 backlog(__u32 w, __u32 base, __u32 avg)
{
	return (__u64)w * (avg - base) / avg;
}

SEC("struct_ops")
void BPF_PROG(fast_init, struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct fast_ca *ca = ca_of(sk);

	ca->rtt_sum = 0;
	ca->rtt_cnt = 0;
	ca->base_rtt = 0x7fffffff;
	ca->beg_snd_nxt = tp->snd_nxt;
	ca->backlog = 0;
	ca->halved = 0;
}

SEC("struct_ops")
void BPF_PROG(fast_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct fast_ca *ca = ca_of(sk);
	__s32 rtt = sample->rtt_us;

	if (rtt <= 0)
		return; // no valid sample (e.g. only retransmitted data acked)
	if ((__u32)rtt < ca->base_rtt)
		ca->base_rtt = rtt;
	ca->rtt_sum += rtt;
	ca->rtt_cnt++;
}

SEC("struct_ops")
void BPF_PROG(fast_set_state, struct sock *sk, __u8 new_state)
{
	struct fast_ca *ca = ca_of(sk);

	if (new_state == TCP_CA_Loss) {
		// After a timeout the round's samples describe a path that
		// stalled; start the next round afresh.
		ca->rtt_sum = 0;
		ca->rtt_cnt = 0;
	}
}

SEC("struct_ops")
void BPF_PROG(fast_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct fast_ca *ca = ca_of(sk);
	__u32 w = tp->snd_cwnd;
	__u32 zero = 0;

	if (after(ack, ca->beg_snd_nxt) && ca->rtt_cnt > 0) {
		struct fast_params *p = bpf_map_lookup_elem(&fast_params, &zero);
		__u32 alpha = 100, gamma = GAMMA_SCALE / 2, trace = 0;
		__u32 base = ca->base_rtt;
		__u32 avg = ca->rtt_sum / ca->rtt_cnt;
		__u32 next = w, phase = 0;

		if (p) {
			alpha = p->alpha;
			gamma = p->gamma;
			trace = p->trace;
		}
		if (gamma < 1 || gamma > GAMMA_SCALE)
			gamma = GAMMA_SCALE / 2;
		if (avg < base)
			avg = base;
		ca->backlog = backlog(w, base, avg);
		if (tp->snd_cwnd < tp->snd_ssthresh) {
			phase = 1;
			if (ca->backlog >= alpha)
				phase = 2;
		}
		if (phase != 1) {
			next = fast_update(w, base, avg, alpha, gamma);
			if (next > tp->snd_cwnd_clamp)
				next = tp->snd_cwnd_clamp;
			tp->snd_cwnd = next;
			// Out of slow start for good: ssthresh never above the
			// window, so the kernel does not count this as slow start.
			if (tp->snd_ssthresh > next)
				tp->snd_ssthresh = next;
		}
		if (trace) {
			struct fast_round r = {
				.time_ns = bpf_ktime_get_ns(),
				.local_port = sk->__sk_common.skc_num,
				.remote_port = bpf_ntohs(sk->__sk_common.skc_dport),
				.cwnd = w,
				.base_rtt = base,
				.avg_rtt = avg,
				.samples = ca->rtt_cnt,
				.next_cwnd = next,
				.ssthresh = tp->snd_ssthresh,
				.alpha = alpha,
				.gamma = gamma,
				.phase = phase,
				.backlog = ca->backlog,
			};
			bpf_ringbuf_output(&fast_trace, &r, sizeof(r), 0);
		}
		ca->beg_snd_nxt = tp->snd_nxt;
		ca->rtt_sum = 0;
		ca->rtt_cnt = 0;
	} else if (after(ack, ca->beg_snd_nxt)) {
		ca->beg_snd_nxt = tp->snd_nxt;
	}

	if (tp->snd_cwnd < tp->snd_ssthresh) {
		// Slow start: one packet more per packet acknowledged.
		__u32 cwnd = tp->snd_cwnd + acked;

		if (cwnd > tp->snd_ssthresh)
			cwnd = tp->snd_ssthresh;
		if (cwnd > tp->snd_cwnd_clamp)
			cwnd = tp->snd_cwnd_clamp;
		tp->snd_cwnd = cwnd;
	}
}

// fast_loss is the ssthresh a loss leaves (and the phase it traces):
// Go's fast.OnLoss is the same. again says the loss comes before the data
// outstanding at the last halving was acknowledged.
static __always_inline __u32 fast_loss(__u32 cwnd, __u32 ssthresh, __u32 backlog, __u32 alpha, int again, __u32 *phase)
{
	if (2 * (__u64)backlog < alpha) {
		*phase = 3; // random: keep
		return cwnd < ssthresh ? ssthresh : cwnd;
	}
	if (again) {
		*phase = 5;
		return ssthresh;
	}
	*phase = 4;
	return cwnd >> 1 < MIN_CWND ? MIN_CWND : cwnd >> 1;
}

SEC("struct_ops")
__u32 BPF_PROG(fast_ssthresh, struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct fast_ca *ca = ca_of(sk);
	struct fast_params *p;
	__u32 zero = 0, alpha = 100, trace = 0, gamma = 0, next, phase;
	int again = ca->halved && after(ca->halved_at, tp->snd_una);

	p = bpf_map_lookup_elem(&fast_params, &zero);
	if (p) {
		alpha = p->alpha;
		gamma = p->gamma;
		trace = p->trace;
	}
	next = fast_loss(tp->snd_cwnd, tp->snd_ssthresh, ca->backlog, alpha, again, &phase);
	if (phase == 4) {
		ca->halved = 1;
		ca->halved_at = tp->snd_nxt;
	}
	if (trace) {
		struct fast_round r = {
			.time_ns = bpf_ktime_get_ns(),
			.local_port = sk->__sk_common.skc_num,
			.remote_port = bpf_ntohs(sk->__sk_common.skc_dport),
			.cwnd = tp->snd_cwnd,
			.base_rtt = ca->base_rtt,
			.next_cwnd = next,
			.ssthresh = tp->snd_ssthresh,
			.alpha = alpha,
			.gamma = gamma,
			.phase = phase,
			.samples = again, // a loss: 1 when it came before the last halving was acknowledged
			.backlog = ca->backlog,
		};
		bpf_ringbuf_output(&fast_trace, &r, sizeof(r), 0);
	}
	return next;
}

SEC("struct_ops")
__u32 BPF_PROG(fast_undo_cwnd, struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;

	return tp->snd_cwnd > tp->prior_cwnd ? tp->snd_cwnd : tp->prior_cwnd;
}

SEC(".struct_ops.link")
struct tcp_congestion_ops fast = {
	.init = (void *)fast_init,
	.ssthresh = (void *)fast_ssthresh,
	.cong_avoid = (void *)fast_cong_avoid,
	.set_state = (void *)fast_set_state,
	.pkts_acked = (void *)fast_pkts_acked,
	.undo_cwnd = (void *)fast_undo_cwnd,
	.name = "fast",
};
