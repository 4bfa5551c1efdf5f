/* Build probe: hwloc headers and library. */
#include <hwloc.h>
int main(void)
{
    hwloc_topology_t t;
    hwloc_topology_init(&t);
    hwloc_topology_destroy(t);
    return 0;
}
