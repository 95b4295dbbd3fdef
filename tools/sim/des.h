/*
 * resil-sim's event-driven model, shared by its parts (one translation
 * unit: tools/resil_sim.c includes them): des_read.c reads an event
 * scenario, des.c runs it, des_report.c prints and draws the figures.
 * The syntax and the model are in docs/resil-sim.md.
 */
#ifndef RESIL_SIM_DES_H
#define RESIL_SIM_DES_H

#include <stdint.h>

#include <resil/cluster.h>
#include <resil/config.h>
#include <resil/directory.h>
#include <resil/pipeline.h>
#include <resil/selector.h>

#include "sim.h"

#define MAX_LINE 512
#define MAX_NAME 32
#define MAX_WORDS 64
#define MAX_ZONES 8
#define MAX_EPS 256
#define MAX_ATT 16
#define MAX_CONFS 4
#define MAX_PHASES 16
/* No limit (a pool without queue= or threads=). */
#define UNBOUNDED UINT32_MAX

/* Return codes of a simulated attempt. */
#define RC_OK 0
#define RC_BUSINESS 400
#define RC_REFUSED 111     /* ECONNREFUSED */
#define RC_EXHAUSTED 429   /* the provider's pool and queue are full */
#define RC_NO_PROVIDER 503 /* routing left no endpoint */

/* A set of endpoints, by index. */
typedef struct epset {
	uint64_t w[MAX_EPS / 64];
} epset;

enum act_kind {
	A_REFUSE,  /* connections refused */
	A_ACCEPT,  /* accepted again */
	A_PAUSE,   /* a stop-the-world pause (GC) */
	A_REMOVE,  /* registry: the endpoints leave, pushed */
	A_ADD,     /* registry: they come back, pushed */
	A_EMPTY,   /* a push with no endpoint */
	A_WITHOUT, /* a push missing the target (the registry unchanged) */
	A_RESYNC,  /* a push of the registry's list as it is */
	A_RULE     /* the condition rules replaced */
};

typedef struct job job;

typedef struct ep {
	char address[40];
	char tag[MAX_NAME]; /* routing tag (tag=); "": untagged */
	int zone;
	unsigned workers, busy;
	uint32_t qcap, nq; /* queue capacity (UNBOUNDED), waiting */
	int exp;           /* service time exponential (else fixed) */
	double mean;       /* ns */
	int refusing;      /* connections refused */
	int listed;        /* registered (the registry's list) */
	int hb_removed;    /* removed because its heartbeats stopped */
	uint64_t paused_until;
	uint64_t paused_total; /* pause time begun so far */
	/* Issue 42: a full queue's refusal is the server's pushback
	 * (RESIL_RC_THROTTLED_MS(retry_after_ms); -1: a plain 429), and it
	 * costs reject_ns of a worker's time, owed by the next service
	 * (debt). */
	long retry_after_ms;
	uint64_t reject_ns, debt;
	job *qhead, *qtail;
	uint64_t served;
} ep;

typedef struct pair {
	uint64_t lo, hi; /* round-trip time range */
	double loss;     /* per message, each way */
	int set;
} pair;

/* A loss burst, or a push lag window (p unused). */
typedef struct window {
	int a, b;
	double p;
	uint64_t d; /* lag: how late a push issued in the window arrives */
	uint64_t from, until;
} window;

typedef struct action {
	uint64_t t;
	enum act_kind kind;
	epset target;
	uint64_t d;  /* A_PAUSE: how long */
	char *rule;  /* A_RULE: the rule's text; NULL: no rule */
	unsigned line;
} action;

typedef struct phase {
	char name[MAX_NAME];
	uint64_t start, end;
	double rate; /* arrivals=: calls per second in it; 0: the scenario's */
} phase;

typedef struct callbatch {
	uint64_t t;
	unsigned n;
	unsigned line;
} callbatch;

/* Reference figures of one configuration, printed beside a phase's
 * (the compare line). */
typedef struct reference {
	double local, p99_ms, errors; /* shares in 0..1 */
} reference;

typedef struct scenario {
	const char *path;
	uint64_t seed;
	int caller;
	uint32_t threads, queue; /* the caller's pool; UNBOUNDED: none */
	char zones[MAX_ZONES][MAX_NAME];
	int nzones;
	ep eps[MAX_EPS];
	int neps;
	pair net[MAX_ZONES][MAX_ZONES];
	window *loss;
	size_t nloss;
	window *lag;
	size_t nlag;
	uint64_t heartbeat; /* registry heartbeat timeout; 0: none */
	action *acts;
	size_t nacts;
	phase phases[MAX_PHASES];
	int nphases;
	callbatch *batches;
	size_t nbatches;
	reference refs[MAX_CONFS];
	size_t nrefs;
	int ref_phase;
	char ref_label[MAX_NAME];
	double rate; /* calls per second; 0: none */
	int phase_rates; /* a phase has arrivals= (piecewise arrivals) */
	uint64_t end;
	uint64_t bucket;
	int trace;
	char method[MAX_NAME];
	/* The calls' request (`request` line): a routing tag (forced or
	 * not), fixed arguments, and keys (argument 0 cycles over "k0" ..
	 * "k<keys-1>" by call number; 0: none). */
	char tag[MAX_NAME];
	int tag_force;
	char argbuf[MAX_NAME * 4]; /* the arguments, each NUL-ended */
	size_t nargs;
	uint32_t keys;
	/* Issue 42 (`critical P%`): the share of calls that are critical
	 * (an attachment priority=critical); overload: the line of
	 * docs/resil-sim.md's overload report instead of the usual one. */
	double critical;
	int overload;
} scenario;

/* One attempt of a call. */
typedef struct att {
	uint32_t id;
	ep *e;        /* the endpoint the call machine picked */
	int answered; /* the answer came */
	int rc;
	uint64_t deadline; /* the machine's for this attempt */
} att;

typedef struct scall {
	resil_call mc;
	resil_result res;
	resil_invocation inv;
	const char *argv[8];
	char key[16];
	uint64_t no, start, step_at;
	unsigned refs;
	int done;
	uint32_t natt, sent, local;
	int crit; /* issue 42: a critical call */
	att a[MAX_ATT];
	struct scall *next_free;
} scall;

struct job {
	scall *c;
	uint32_t ai;
	ep *e;
	uint64_t rtt;
	uint64_t paused_seen; /* the endpoint's paused_total at service */
	int rc;
	job *next;
};

typedef struct rec {
	uint64_t start;
	uint64_t lat;
	uint8_t err, sent, local, crit;
} rec;

/* A configuration as the simulator reads it. */
typedef struct simconf {
	const char *path;
	resil_config *conf;
	int rule_force; /* router.condition.force, for the scenario's rules */
} simconf;

/* A call waiting for a thread of the caller's pool. */
typedef struct waiter {
	uint64_t t, no; /* arrival, number */
} waiter;

/* The calls waiting, in arrival order (a ring). */
typedef struct waitq {
	waiter *v;
	size_t head, n, cap;
} waitq;

typedef struct run {
	const scenario *s;
	const simconf *sc;
	ep eps[MAX_EPS];
	resil_manual_clock mc;
	sim_queue q;
	sim_rng arrivals, service, net, lb, prio;
	resil_rng lbrng;
	resil_random lbrand;
	resil_pipeline *p;
	resil_directory *dir;
	resil_selector *sel;
	scall *free_calls;
	job *free_jobs;
	uint64_t ncalls;
	uint32_t busy; /* threads of the caller's pool in use */
	waitq waiting;
	epset *pushes; /* lists on their way to the caller */
	size_t npushes, cappushes;
	uint64_t last_delivery;
	rec *recs;
	size_t nrecs, caprecs;
	/* The bulkhead's limit per phase (issue 28), read at each arrival:
	 * the last, and the range over the phase's second half. */
	uint32_t lim_last[MAX_PHASES], lim_lo[MAX_PHASES], lim_hi[MAX_PHASES];
	int lim_seen[MAX_PHASES];
	int oom;
} run;

/* The figures of a set of calls. */
typedef struct figures {
	uint64_t calls, errors, sent, local;
	double p99_ms;
} figures;

static int read_des(const char *file, scenario *s);
static void free_scenario(scenario *s);
static int grow(void **v, size_t *cap, size_t n, size_t size);

static inline void
epset_add(epset *s, int i)
{
	s->w[i / 64] |= (uint64_t)1 << (i % 64);
}

static inline int
epset_has(const epset *s, int i)
{
	return (int)((s->w[i / 64] >> (i % 64)) & 1);
}

#endif /* RESIL_SIM_DES_H */
