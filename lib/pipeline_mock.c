/*
 * The mock stage's configuration in a pipeline (lib/pipeline_mock.h).
 */
#include "pipeline_mock.h"

#include <stdio.h>
#include <string.h>

#include "mock_internal.h"

/* Build a resil_mock from the service spec and every method's own. */
resil_err
resil__build_mock(resil_pipeline *p, const settings *g,
    const char *service_spec, const char *method_name, const char *method_spec,
    int method_unset, resil_mock **out, resil_diag *diag)
{
	resil_mock_config mc;
	resil_mock *m;
	method *it, *tmp;
	resil_err err;

	resil_mock_config_init(&mc);
	mc.service = p->service;
	mc.spec = service_spec;
	mc.registry = p->registry;
	mc.alloc = &p->alloc;
	err = resil_mock_new(&m, &mc, diag);
	if (err != RESIL_OK)
		return err;
	HASH_ITER(hh, g->methods, it, tmp)
	{
		/* cppcheck-suppress uninitvar ; it is set by HASH_ITER */
		const char *spec = it->mock_set ? it->mock_spec : NULL;

		if (method_name != NULL && strcmp(method_name, it->name) == 0)
			spec = method_unset ? NULL : method_spec;
		err = resil_mock_set_method(m, it->name, it->type, spec, diag);
		if (err != RESIL_OK) {
			resil_mock_free(m);
			return resil__diag_prefix(diag, err, it->name);
		}
	}
	*out = m;
	return RESIL_OK;
}

resil_mock *
resil__mock_hold(resil_pipeline *p, const settings *g, unsigned *tok)
{
	unsigned st = resil__thread_stripe(NSTRIPES);
	uint64_t gen;

	for (;;) {
		gen = resil__load64(&p->mock_gen);
		resil__inc64(&p->mock_rd[st].n[gen & 1]);
		if (resil__load64_after_rmw(&p->mock_gen) == gen)
			break;
		resil__dec64(&p->mock_rd[st].n[gen & 1]);
	}
	*tok = (st << 1) | (unsigned)(gen & 1);
	return resil__loadptr((void *const *)&g->mock);
}

/* After a swap: wait until every reader that may hold the old pointer
 * (announced under the old generation's parity) is done. */
static void
rd_quiesce(mock_readers *rd, uint64_t old_gen)
{
	unsigned i, spins = 0;

	for (i = 0; i < NSTRIPES; i++)
		while (resil__load64_after_rmw(&rd[i].n[old_gen & 1]) != 0)
			resil__backoff(&spins);
}

resil_err
resil_pipeline_set_mock(
    resil_pipeline *p, const char *name, const char *spec, resil_diag *diag)
{
	const resil_allocator *resil__a;
	resil_mock *m = NULL, *old;
	method *meth = NULL;
	settings *g;
	char *copy = NULL;
	resil_err err;

	if (p == NULL)
		return RESIL_E_INVAL;
	resil__a = &p->alloc;
	if (spec != NULL && (copy = resil__strdup(resil__a, spec)) == NULL)
		return resil__diagf(
		    diag, RESIL_E_NOMEM, "pipeline: out of memory");
	resil__spin_lock(&p->mock_lock);
	/* Under the lock the current settings cannot be replaced. */
	g = p->cur;
	if (name != NULL) {
		meth = find_in(g, name);
		if (meth == NULL) {
			resil__spin_unlock(&p->mock_lock);
			resil__strfree(resil__a, copy);
			return resil__diagf(diag, RESIL_E_INVAL,
			    "%s.mock: %s is not a method declared in the "
			    "configuration of %s",
			    name, name, p->service);
		}
	}
	if (name == NULL)
		err = resil__build_mock(p, g, copy, NULL, NULL, 0, &m, diag);
	else
		err = resil__build_mock(
		    p, g, g->service_spec, name, copy, spec == NULL, &m, diag);
	if (err != RESIL_OK) {
		resil__spin_unlock(&p->mock_lock);
		resil__strfree(resil__a, copy);
		return err;
	}
	if (name == NULL) {
		resil__strfree(resil__a, g->service_spec);
		g->service_spec = copy;
	} else {
		/* The method table is read without locks by running calls,
		 * but only its mock_spec fields change here, and those are
		 * read by writers alone (under mock_lock). */
		resil__strfree(resil__a, meth->mock_spec);
		meth->mock_spec = copy;
		meth->mock_set = spec != NULL;
	}
	old = resil__loadptr((void *const *)&g->mock);
	if (m != NULL && resil__mock_may_force(m))
		resil__store64(&g->mock_forces, 1);
	resil__storeptr((void **)&g->mock, m);
	if (m == NULL || !resil__mock_may_force(m))
		resil__store64(&g->mock_forces, 0);
	/* The old one goes as soon as no call can be reading it: memory
	 * stays bounded however often the specs switch. */
	rd_quiesce(p->mock_rd, resil__faa64(&p->mock_gen, 1));
	resil__spin_unlock(&p->mock_lock);
	resil_mock_free(old);
	return RESIL_OK;
}

/*
 * A mock endpoint of the directory answers for the mock stage (Dubbo's
 * mock:// providers): the consumer's spec chose the mode (failure NULL:
 * force), the endpoint's spec gives the answer. 1 when it answered into
 * *out; 0 when there is none (or its spec does not parse): the local mock
 * answers then.
 */
int
resil__mock_from_endpoint(resil_pipeline *p, const resil_args *args,
    const resil_failure *failure, resil_result *out)
{
	char spec[RESIL_DIAG_MAX], full[RESIL_DIAG_MAX + 8];
	const char *body = spec;
	resil_mock_config mc;
	resil_mock *m;
	resil_err err;

	if (p->sel == NULL ||
	    !resil_selector_mock_spec(
	        p->sel, args->method, spec, sizeof(spec)))
		return 0;
	while (*body == ' ' || *body == '\t')
		body++;
	if (strncmp(body, "force:", 6) == 0)
		body += 6;
	else if (strncmp(body, "fail:", 5) == 0)
		body += 5;
	snprintf(full, sizeof(full), "%s%s",
	    failure == NULL ? "force:" : "fail:", body);
	resil_mock_config_init(&mc);
	mc.service = p->service;
	mc.spec = full;
	mc.registry = p->registry;
	mc.alloc = &p->alloc;
	if (resil_mock_new(&m, &mc, NULL) != RESIL_OK)
		return 0;
	err = resil_mock_invoke(m, args, failure, out);
	resil_mock_free(m);
	return err != RESIL_E_NOTFOUND && err != RESIL_E_NOMEM &&
	    err != RESIL_E_INVAL;
}

/* The chain's mock handler: whatever mock is current when it runs. */
resil_verdict
resil__mock_handler(void *ctx, const resil_args *args,
    const resil_failure *failure, resil_result *out)
{
	settings *g = ctx;
	resil_pipeline *p = g->p;
	resil_mock *m;
	resil_err err;
	unsigned tok;

	if (resil__loadptr((void *const *)&g->mock) == NULL)
		return RESIL_FALLBACK_PASS;
	m = resil__mock_hold(p, g, &tok);
	if (m != NULL && p->sel != NULL) {
		const resil_mock_spec *spec;

		if (resil_mock_lookup(m, args->method, &spec) == RESIL_OK &&
		    spec->action != RESIL_MOCK_NONE &&
		    resil__mock_from_endpoint(p, args, failure, out)) {
			mock_release(p, tok);
			return RESIL_FALLBACK_ANSWER;
		}
	}
	err = m != NULL ? resil_mock_invoke(m, args, failure, out)
	                : RESIL_E_NOTFOUND;
	mock_release(p, tok);
	if (err == RESIL_E_NOTFOUND)
		return RESIL_FALLBACK_PASS;
	return RESIL_FALLBACK_ANSWER;
}
