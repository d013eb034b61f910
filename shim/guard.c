// SPDX-License-Identifier: MIT
/*
 * The re-entry guard's mark (guard.h).  L0 platform: calls nothing.
 */
#include "guard.h"

__thread int io_busy __attribute__((tls_model("initial-exec")));
