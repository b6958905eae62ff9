#include "base/error.h"

const char *steno_last_error(void) { return err_message(); }
