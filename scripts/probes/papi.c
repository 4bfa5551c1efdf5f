/* Build probe: PAPI headers and library. */
#include <papi.h>
int main(void) { return PAPI_library_init(PAPI_VER_CURRENT) < 0; }
