"""One process-wide lock for building IR and compiling: the frontend, the passes and the backends' code
generators share caches (functions' typed IR, lowered variants, specialisations), so a cache miss builds
under this lock (re-entrant: building a kernel builds the functions it calls). Cache hits take no lock."""

import threading

COMPILING = threading.RLock()
