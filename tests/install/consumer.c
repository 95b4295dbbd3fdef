#include <stdio.h>
#include <string.h>

#include <resil/breaker.h>

int
main(void)
{
	resil_breaker_config cfg = resil_breaker_config_default();
	resil_breaker *b;

	if (resil_breaker_new(&b, &cfg, NULL) != RESIL_OK)
		return 1;
	if (resil_breaker_get_state(b) != RESIL_BREAKER_CLOSED)
		return 2;
	resil_breaker_free(b);
	if (strcmp(resil_version_string(), RESIL_VERSION_STRING) != 0)
		return 3;
	printf("resil %s installed and usable\n", resil_version_string());
	return 0;
}
