/*
 * The protocol of the bulkhead that waits (lib/limit_wait.c, issue 42),
 * for spin (tools/check-model.sh). The in-flight word is
 * [waiting:32][count:32]; the fast paths are a load then a CAS on the
 * whole word (acquire when nobody waits and count < LIMIT, release when
 * nobody waits); everything else decides under the queue's lock: a
 * newcomer takes a free slot only with nobody queued, else raises the
 * waiting half and queues; a release with waiters hands its slot to the
 * first (the count stays, the waiting half drops); a waiter whose wait
 * ends leaves the queue under the lock, unless it was handed the slot.
 *
 * Properties:
 *   P1  never more holders than LIMIT (assertion);
 *   P2  no lost wake-up: every client ends (a waiter left queued with
 *       nobody to release is an invalid end state);
 *   P3  the waiting half equals the queue's length whenever the lock is
 *       free and no CAS is half done (assertion at each unlock).
 * Checked with waits that may end at any moment (P1, P3) and with
 * -DNO_TIMEOUT, waits that only a hand-over ends (P2). The variant
 * -DOLD_RELEASE_IGNORES_WAITERS (a release that frees its slot whatever
 * the waiting half says) must be caught by P2.
 */
#define N 3
#define LIMIT 1

byte count = 0;   /* the word's count half */
byte waiting = 0; /* the word's waiting half */
bit lock = 0;
byte q[N];
byte qlen = 0;
bit granted[N];
byte holders = 0;

inline lock_acq() {
	atomic { lock == 0 -> lock = 1 }
}

inline lock_rel() {
	assert(waiting == qlen); /* P3 */
	lock = 0
}

/* Take q[k] out, shifting the rest down. */
inline q_remove(k) {
	j = k;
	do
	:: j + 1 < qlen -> q[j] = q[j + 1]; j++
	:: else -> break
	od;
	qlen--
}

proctype client(byte id) {
	byte c, w, j, k, h;

fast:
	atomic { c = count; w = waiting }
	if
	:: w == 0 && c < LIMIT ->
		atomic {
			if
			:: count == c && waiting == w -> count = c + 1; goto have
			:: else -> goto fast
			fi
		}
	:: else -> skip
	fi;
	lock_acq();
slow:
	atomic { c = count; w = waiting }
	if
	:: qlen == 0 && c < LIMIT ->
		atomic {
			if
			:: count == c && waiting == w -> count = c + 1
			:: else -> goto slow
			fi
		}
		lock_rel();
		goto have
	:: else ->
		atomic {
			if
			:: count == c && waiting == w ->
				waiting = w + 1; q[qlen] = id; qlen++
			:: else -> goto slow
			fi
		}
	fi;
	lock_rel();
	/* Queued: the slot comes, or the wait ends (at any moment; with
	 * -DNO_TIMEOUT never, so a lost wake-up is a client that never
	 * ends). */
	if
	:: granted[id] == 1 -> goto have
#ifndef NO_TIMEOUT
	:: true ->
		lock_acq();
		if
		:: granted[id] == 1 -> lock_rel(); goto have
		:: else ->
			k = 0;
			do
			:: q[k] == id -> break
			:: else -> k++
			od;
			q_remove(k);
			atomic { waiting-- };
			lock_rel();
			goto done
		fi
#endif
	fi;
have:
	atomic { holders++; assert(holders <= LIMIT) } /* P1 */
	holders--;
rel:
	atomic { c = count; w = waiting }
#ifdef OLD_RELEASE_IGNORES_WAITERS
	atomic {
		if
		:: count == c && waiting == w -> count = c - 1
		:: else -> goto rel
		fi
	}
#else
	if
	:: w == 0 ->
		atomic {
			if
			:: count == c && waiting == w -> count = c - 1
			:: else -> goto rel
			fi
		}
	:: else ->
		lock_acq();
relslow:
		atomic { c = count; w = waiting }
		if
		:: w > 0 ->
			/* Hand the slot to the first waiter. */
			atomic {
				if
				:: count == c && waiting == w ->
					waiting = w - 1; h = q[0]
				:: else -> goto relslow
				fi
			}
			q_remove(0);
			granted[h] = 1
		:: else ->
			atomic {
				if
				:: count == c && waiting == w -> count = c - 1
				:: else -> goto relslow
				fi
			}
		fi;
		lock_rel()
	fi;
#endif
done:
	skip
}

init {
	atomic {
		run client(0);
		run client(1);
		run client(2)
	}
}
