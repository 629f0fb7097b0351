/*
 * egsctl.c: the EGS command line.  For now it only prints its usage; the commands (get, apply -f,
 * create, delete, release, ...) arrive with the full libegs.
 */
#include <stdio.h>
#include <string.h>

static void usage(FILE *f)
{
	fputs("usage: egsctl [--server URL] COMMAND [ARGS...]\n"
	      "\n"
	      "The command line of the Elastic GPU Service.  No commands are available in this build yet.\n",
	      f);
}

int main(int argc, char **argv)
{
	if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		usage(stdout);
		return 0;
	}
	usage(stderr);
	return 2;
}
