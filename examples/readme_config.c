#include <stdio.h>

#include <resil/config.h>
#include <resil/pipeline.h>

int
main(int argc, char **argv)
{
	resil_config *conf;
	resil_pipeline *p;
	resil_diag diag;

	if (argc != 2) {
		fprintf(stderr, "usage: %s FILE\n", argv[0]);
		return 2;
	}
	/* timeout=3000 is 3 s: a duration without a unit is milliseconds */
	if (resil_config_parse_file(&conf, argv[1], NULL, &diag) != RESIL_OK ||
	    resil_pipeline_new(&p, resil_config_pipeline(conf), &diag) !=
	        RESIL_OK) {
		fprintf(stderr, "%s\n", diag.msg); /* file:line: message */
		return 1;
	}
	printf("%s ready\n", resil_pipeline_service(p));
	resil_pipeline_free(p);
	resil_config_free(conf);
	return 0;
}
