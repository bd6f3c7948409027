/* papcoll native core: see native/papcoll_native.h for the interface. */
#include "papcoll_native.h"

int pc_version(void) { return 1; }
