/*
 * internal.h: what libegs's own modules share and its users do not see (egs.h is the public side).
 */
#ifndef EGS_CLIENT_INTERNAL_H
#define EGS_CLIENT_INTERNAL_H

#include <egs/egs.h>

/* The bound of the typed calls, as set by egs_client_set_timeout(). */
long egs__client_timeout(const struct egs_client *c);

#endif
