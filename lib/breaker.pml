/*
 * A model of the breaker's lock-free protocol (lib/breaker.c), checked with
 * spin: `make model` (tools/check-model.sh). Change both together.
 *
 * What is modelled, step for step as the C code does it:
 * - the state word {state, TRANSIT, probes granted, episode}, changed only
 *   by compare-and-swap (an atomic block here);
 * - acquire: CLOSED grants a plain permit; OPEN, once its wait has passed
 *   (a nondeterministic choice: time is not modelled), moves to HALF_OPEN
 *   and asks again; HALF_OPEN grants a probe while fewer than K are out;
 *   a word with TRANSIT is waited for, never a reason to reject;
 * - record: compare the permit's episode with the word's; announce on the
 *   stripe counter of the episode's parity, re-read the word, write the
 *   window (CLOSED) or the probe counts (HALF_OPEN), withdraw, then decide
 *   (trip on N consecutive failures; after K probe reports close or
 *   reopen);
 * - release: give a probe permit back with a CAS while its episode lasts;
 * - transition: the CAS to (to, episode + 1, TRANSIT); wait until no
 *   announcement of the old parity is left; empty the counts of the new
 *   state; tell the listener; publish without TRANSIT;
 * - manual transitions (reset to CLOSED, a fresh HALF_OPEN) at any time.
 *
 * Properties (assertions, checked in every interleaving):
 *   P1  at most K probe permits are granted per HALF_OPEN episode;
 *   P2  exactly one thread owns each transition; the listener hears the
 *       episodes 1, 2, 3, ... in order;
 *   P3  an outcome lands only in the counts of its permit's own episode
 *       (no outcome of an old episode changes a new one);
 *   P4  an acquire in HALF_OPEN is rejected only when K probes are out
 *       (a transition in progress is no reason);
 *   P5  no stuck HALF_OPEN: when the workers are done, healthy traffic
 *       alone (acquire + success, the wait allowed to pass) reaches CLOSED.
 * With -DOLD_REJECT_ON_TRANSIT or -DOLD_NO_QUIESCE the model has the
 * protocol before the fixes of this turn, and spin finds P4 resp. P3
 * violated (tools/check-model.sh checks that too, so the model can fail).
 */

#define CLOSED    0
#define OPEN      1
#define HALF_OPEN 2

#ifndef K
#define K 2          /* permitted probes */
#endif
#define N 2          /* consecutive failures that trip */
#define MAXEP 7      /* episodes modelled; transitions stop at the bound */
#define NWORKERS 2
#define CALLS 2      /* calls per worker */

/* The state word. */
byte state = CLOSED;
bit transit = 0;
byte granted = 0;
byte ep = 0;

/* Announcements, by episode parity (all stripes in one counter). */
byte announced[2];

/* CLOSED window (consecutive failures) and HALF_OPEN probe counts. */
byte consec = 0;
byte reported = 0;
byte pfailed = 0;

/* Ghosts: which episode the counts belong to, grants per episode, the
 * transition owners, the listener's last episode. */
byte window_ep = 0;
byte probes_ep = 0;
byte grants[MAXEP + 1];
byte owners = 0;
byte last_seq = 0;
bit workers_done[NWORKERS];

/* Move from the word (ws, 0, wg, we) to `to`; ok tells whether this thread
 * won. */
inline transition(ws, wg, we, to, ok)
{
	atomic {
		if
		:: state == ws && transit == 0 && granted == wg && ep == we &&
		   we < MAXEP ->
			state = to; transit = 1; granted = 0; ep = we + 1;
			owners++; ok = 1
		:: else -> ok = 0
		fi
	}
	if
	:: ok ->
		assert(owners == 1);                      /* P2 */
#ifndef OLD_NO_QUIESCE
		(announced[we % 2] == 0);                    /* quiesce */
#endif
		if
		:: to == CLOSED -> consec = 0; window_ep = we + 1
		:: to == HALF_OPEN -> reported = 0; pfailed = 0; probes_ep = we + 1
		:: else -> skip
		fi;
		assert(last_seq + 1 == we + 1);           /* P2: in order */
		last_seq = we + 1;
		atomic { owners--; transit = 0 }
	:: else -> skip
	fi
}

/* acquire: on return, got = 1 with (pep, probe) or got = 0 (rejected).
 * elapse: 0, OPEN's wait never passes; 1, it has passed; 2, either. */
inline acquire(got, pep, probe, elapse)
{
	got = 0;
	do
	:: atomic { rs = state; rt = transit; rg = granted; re = ep };
		if
		:: rt ->
#ifdef OLD_REJECT_ON_TRANSIT
			if
			:: rs == HALF_OPEN -> assert(rg == K)  /* P4 */
			:: else -> skip
			fi;
			break
#else
			(transit == 0 || ep != re)              /* await */
#endif
		:: !rt && rs == CLOSED -> got = 1; pep = re; probe = 0; break
		:: !rt && rs == OPEN && re >= MAXEP -> break
		:: !rt && rs == OPEN && re < MAXEP ->
			if
			:: elapse != 0 -> transition(OPEN, 0, re, HALF_OPEN, ok)
			:: elapse != 1 -> break                /* wait not over */
			fi
		:: !rt && rs == HALF_OPEN ->
			if
			:: rg >= K -> break
			:: else ->
				atomic {
					if
					:: state == rs && transit == 0 &&
					   granted == rg && ep == re ->
						granted++; ok = 1;
						grants[re]++;
						assert(grants[re] <= K)  /* P1 */
					:: else -> ok = 0
					fi
				}
				if
				:: ok -> got = 1; pep = re; probe = 1; break
				:: else -> skip
				fi
			fi
		fi
	od
}

/* Announce for episode pep; on return, ok says whether it still holds. */
inline announce(pep, ok)
{
	announced[pep % 2]++;
	if
	:: ep == pep -> ok = 1
	:: else -> announced[pep % 2]--; ok = 0
	fi
}

inline record(pep, probe, fail)
{
	atomic { rs = state; rt = transit; rg = granted; re = ep };
	if
	:: re != pep -> skip                               /* stale */
	:: else ->
		if
		:: rs == CLOSED ->
			announce(pep, ok);
			if
			:: ok ->
				assert(window_ep == pep);        /* P3 */
				if
				:: fail -> consec++
				:: else -> consec = 0
				fi;
				trip = fail && consec >= N;
				announced[pep % 2]--;
				if
				:: trip -> transition(CLOSED, 0, pep, OPEN, ok)
				:: else -> skip
				fi
			:: else -> skip
			fi
		:: rs == HALF_OPEN ->
			announce(pep, ok);
			if
			:: ok ->
				assert(probes_ep == pep);        /* P3 */
				reported++;
				if
				:: fail -> pfailed++
				:: else -> skip
				fi;
				last = reported == K;
				bad = pfailed > 0;
				announced[pep % 2]--;
				/* decide: retry the CAS while the episode lasts */
				do
				:: last ->
					atomic { rs = state; rt = transit;
						 rg = granted; re = ep };
					if
					:: re != pep || rs != HALF_OPEN -> break
					:: rt -> (transit == 0 || ep != re)
					:: else ->
						if
						:: bad -> transition(HALF_OPEN, rg,
							    pep, OPEN, ok)
						:: else -> transition(HALF_OPEN, rg,
							    pep, CLOSED, ok)
						fi;
						if
						:: ok -> break
						:: else -> skip
						fi
					fi
				:: else -> break
				od
			:: else -> skip
			fi
		:: else -> skip
		fi
	fi
}

inline release(pep, probe)
{
	if
	:: probe ->
		atomic {
			if
			:: transit == 0 && ep == pep && state == HALF_OPEN &&
			   granted > 0 ->
				granted--; grants[pep]--
			:: else -> skip   /* its episode is over */
			fi
		}
	:: else -> skip
	fi
}

proctype worker(byte id)
{
	byte rs, re, rg, pep;
	bit rt, ok, got, probe, trip, last, bad;
	byte i = 0, what;

	do
	:: i < CALLS ->
		acquire(got, pep, probe, 2);
		if
		:: got ->
			if
			:: what = 0                  /* success */
			:: what = 1                  /* failure */
			:: what = 2                  /* not made */
			fi;
			if
			:: what < 2 -> record(pep, probe, what)
			:: else -> release(pep, probe)
			fi
		:: else -> skip
		fi;
		i++
	:: else -> break
	od;
	workers_done[id] = 1
}

/* A manual transition at any moment: reset, or a fresh HALF_OPEN. */
proctype manual()
{
	byte rs, re, rg, to;
	bit rt, ok;

	do
	:: atomic { rs = state; rt = transit; rg = granted; re = ep };
		if
		:: rt -> (transit == 0 || ep != re)
		:: !rt ->
			if
			:: to = CLOSED
			:: to = HALF_OPEN
			fi;
			transition(rs, rg, re, to, ok);
			if
			:: ok -> break
			:: else -> skip
			fi
		fi
	:: ep >= MAXEP -> break
	od
}

/* P5: once the workers are done (their permits reported or given back),
 * healthy traffic closes the breaker. */
proctype healthy()
{
	byte rs, re, rg, pep;
	bit rt, ok, got, probe, trip, last, bad;
	byte tries = 0;

	(workers_done[0] && workers_done[1]);
	do
	:: state == CLOSED && transit == 0 -> break
	:: ep >= MAXEP - 1 -> break   /* too close to the bound to judge */
	:: else ->
		acquire(got, pep, probe, 1);
		if
		:: got -> record(pep, probe, 0)
		:: else -> skip
		fi;
		tries++;
		assert(tries <= 2 * K + 2)    /* P5: no stuck HALF_OPEN */
	od
}

init
{
	atomic {
		run worker(0);
		run worker(1);
		run manual();
		run healthy()
	}
}
