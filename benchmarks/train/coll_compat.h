#include <stdlib.h>
static inline int sl_comm_create(sl_comm **c, MPI_Comm comm, sl_coll impl, sl_mem_space space){ *c = malloc(sizeof **c); int rc = sl_comm_init(*c, comm, impl, space); if (rc) {free(*c); *c=NULL;} return rc;}
static inline void sl_comm_destroy(sl_comm *c){ if(c){sl_comm_free(c); free(c);} }
static inline int sl_comm_rank(const sl_comm *c){return c->rank;}
static inline int sl_comm_size(const sl_comm *c){return c->size;}
static inline unsigned long long sl_comm_bytes_sent(const sl_comm *c){return c->bytes_sent;}
