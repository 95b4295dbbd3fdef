/* A static consumer of the registry source: resil_source_new() names the
 * ZooKeeper backend, so a static link needs the C client and the thread
 * library, which resil.pc's Libs.private must list. */
#include <stdio.h>

#include <resil/directory.h>
#include <resil/source.h>

int
main(void)
{
	resil_directory_config dc = resil_directory_config_default();
	resil_source_config sc = resil_source_config_default();
	resil_directory *dir;
	resil_registry_source *src;
	resil_diag diag;

	if (resil_directory_new(&dir, &dc, NULL) != RESIL_OK)
		return 1;
	/* No server: the source connects in the background. */
	sc.registry = "zookeeper://127.0.0.1:1";
	sc.service = "com.example.DemoService";
	sc.directory = dir;
	if (resil_source_new(&src, &sc, &diag) != RESIL_OK) {
		fprintf(stderr, "%s\n", diag.msg);
		return 2;
	}
	resil_source_free(src);
	resil_directory_free(dir);
	printf("resil's registry source linked statically\n");
	return 0;
}
